#!/usr/bin/env python3
"""What the largest request of each kind costs `orzo serve`, and what it costs everyone else
while it is prepared: two builds side by side, alternating.

    python3 bench/run_request_cost.py --a OLD/orzo --b NEW/orzo [--pairs 1] [--out bench/results/request-cost.json]

Each build serves SmolLM2-135M-Instruct (../shared; a vocabulary of 49,152) with its defaults.
Per kind: the seconds from sending the request to its answer, and the longest a short
completion sent meanwhile (one after another, on other connections) waited for its answer.
Kinds: a logit_bias for every token; an object of 600,000 keys (refused after parsing); a
million stop_token_ids; 16 stop strings of 1 KiB; an 8 MiB prompt (refused as too long after
tokenizing); /tokenize of 8 MiB. Medians over the pairs; the CPU is printed with them.
"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("ORZO_SHARED", os.path.join(ROOT, "..", "shared"))
MODEL = os.path.join(SHARED, "models", "smollm2-135m-instruct", "SmolLM2-135M-Instruct.Q4_1.gguf")
VOCAB = 49152


def text(n, seed=1):
    r = random.Random(seed)
    return "".join(r.choice("abcdefghijklmnopqrstuvwxyz .,!?XYZ0123456789") for _ in range(n))


def kinds():
    r = random.Random(2)
    return [
        ("logit_bias, 49,152 entries", "/v1/completions",
         {"prompt": "Hello", "max_tokens": 8, "logit_bias": {str(i): 0.5 for i in range(VOCAB)}}),
        ("an object of 600,000 keys", "/v1/completions",
         {"prompt": "Hello", "logit_bias": {str(i): 1 for i in range(600_000)}}),
        ("1,000,000 stop_token_ids", "/v1/completions",
         {"prompt": "Hello", "max_tokens": 32, "ignore_eos": True,
          "stop_token_ids": [r.randrange(VOCAB) for _ in range(1_000_000)]}),
        ("16 stop strings of 1 KiB", "/v1/completions",
         {"prompt": "Hello", "max_tokens": 64, "stop": [text(1024, i) for i in range(16)]}),
        ("an 8 MiB prompt", "/v1/completions", {"prompt": text((8 << 20) - 200), "max_tokens": 1}),
        ("/tokenize, 8 MiB", "/tokenize", {"prompt": text((8 << 20) - 200)}),
    ]


class Server:
    def __init__(self, orzo):
        self.proc = subprocess.Popen([orzo, "serve", "-m", MODEL, "--port", "0", "--served-model-name", "m",
                                      "--stats-interval", "0"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.port = None
        for line in self.proc.stderr:
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            if "ready, serving" in line:
                break
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()

    def post(self, path, body, timeout=600):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(60)


def measure(server, path, body):
    data = json.dumps(dict(body, model="m")).encode()
    result = {}

    def big():
        start = time.monotonic()
        result["status"], _ = server.post(path, data)
        result["seconds"] = time.monotonic() - start

    t = threading.Thread(target=big)
    t.start()
    time.sleep(0.05)
    waits = []
    while t.is_alive():
        start = time.monotonic()
        server.post("/v1/completions", {"model": "m", "prompt": "Hi", "max_tokens": 1})
        waits.append(time.monotonic() - start)
    t.join()
    return result["seconds"], max(waits, default=0.0), result["status"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="the orzo binary before")
    ap.add_argument("--b", required=True, help="the orzo binary after")
    ap.add_argument("--pairs", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "request-cost.json"))
    a = ap.parse_args()
    runs = {"a": {}, "b": {}}
    for _ in range(a.pairs):
        for side in ("a", "b"):
            server = Server(getattr(a, side))
            try:
                for name, path, body in kinds():
                    runs[side].setdefault(name, []).append(measure(server, path, body))
            finally:
                server.stop()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    rows = []
    print(f"CPU: {cpu}, {os.cpu_count()} threads\n")
    print("| request | before: s | before: others waited s | after: s | after: others waited s | status |")
    print("|---|---:|---:|---:|---:|---|")
    for name, _, _ in kinds():
        med = {s: (statistics.median(x[0] for x in runs[s][name]), statistics.median(x[1] for x in runs[s][name]))
               for s in ("a", "b")}
        status = f"{runs['a'][name][0][2]} / {runs['b'][name][0][2]}"
        rows.append({"request": name, "before": med["a"], "after": med["b"], "status": status})
        print(f"| {name} | {med['a'][0]:.3f} | {med['a'][1]:.3f} | {med['b'][0]:.3f} | {med['b'][1]:.3f} | {status} |")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"cpu": cpu, "pairs": a.pairs, "rows": rows, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
