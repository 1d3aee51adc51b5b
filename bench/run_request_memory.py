#!/usr/bin/env python3
"""Does `orzo serve` keep memory per request it has answered? RSS before and after batches of
the same request against one fresh server: a flat line after warm-up, or bytes per request.

    python3 bench/run_request_memory.py [--orzo build/cli/orzo] [--kinds whole stream disconnect malformed]
                                        [--batches 4] [--requests 2000]

Each batch sends --requests requests of one kind from 8 threads (stories260K, 20 tokens each
for `whole` and `stream`, a stream left after 3 events for `disconnect`, bad JSON for
`malformed`) and prints the server's RSS before and after it, and the growth per request.
"""
import argparse
import os
import random
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import soak  # noqa: E402  (the soak's HTTP client and /proc readers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--orzo", default=os.path.join(soak.ROOT, "build", "cli", "orzo"))
    ap.add_argument("--kinds", nargs="+", default=["whole", "stream", "disconnect", "malformed"])
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--requests", type=int, default=2000)
    a = ap.parse_args()
    port = soak.free_port()
    server = subprocess.Popen([a.orzo, "serve", "-m", soak.STORIES, "--port", str(port), "--served-model-name", "soak",
                               "-t", "1", "--stats-interval", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def body(stream, n=20):
        return {"model": "soak", "prompt": "Once upon a time", "max_tokens": n, "temperature": 0.8,
                "seed": random.randint(0, 1 << 30), "ignore_eos": True, "stream": stream}

    def send(kind):
        if kind == "whole":
            soak.http(port, "POST", "/v1/completions", body(False))
        elif kind == "stream":
            s = soak.Stream(port, body(True))
            s.read()
            s.close()
        elif kind == "disconnect":
            s = soak.Stream(port, body(True, 200))
            s.read(max_events=3)
            s.close()
        else:
            soak.http(port, "POST", "/v1/completions", b'{"model": "soak", "prompt": ')

    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if soak.http(port, "GET", "/health", timeout=5)[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        print(f"CPU: {open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()}")
        for kind in a.kinds:
            for batch in range(a.batches):
                before = soak.proc_status(server.pid)[0]
                threads = [threading.Thread(target=lambda: [send(kind) for _ in range(a.requests // 8)]) for _ in range(8)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                time.sleep(0.5)
                after = soak.proc_status(server.pid)[0]
                print(f"{kind} batch {batch}: RSS {before / 2**20:.1f} -> {after / 2**20:.1f} MiB, "
                      f"{(after - before) / a.requests:.0f} bytes per request", flush=True)
    finally:
        server.terminate()
        server.wait(60)


if __name__ == "__main__":
    main()
