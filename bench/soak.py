#!/usr/bin/env python3
"""Soak: `orzo serve` under about three times the load it can serve, with every fault a
server meets, for a long time; then whether anything leaked or was lost.

    python3 bench/soak.py [--build build] [--duration 1800] [--model stories260K.gguf] [--check]
                          [--out bench/results/soak.json] [--plot bench/results/soak.png]

The server runs the model's layers 0-A itself and a remote `orzo worker` serves A-N (joined
through the CAF middleman). Clients, as threads that each keep one request going:
  - 3 x --max-num-seqs of them, so that the waiting queue is never empty: half stream, a
    third wait for whole answers, the rest disconnect mid-stream or send a malformed request
    (bad JSON, a field out of range, an unknown model: each must get its 4xx);
  - every few seconds a stalled reader: a stream whose client stops reading for a while,
    then reads it to the end (or leaves, every other time);
  - every --kill-every seconds the remote worker is killed (SIGKILL) and a new one started,
    so every request in flight goes through a recovery.
Each second it samples the server's and the worker's RSS and open file descriptors, the KV
blocks in use, running, waiting and paused requests, and the recoveries so far. At the end
(clients stopped, server idle) it reports request outcomes, TTFT and end-to-end latency
percentiles by minute, and with --check exits 1 unless: every request ended exactly once
(a stream with one finish_reason or one error event, an answer with one status), no 5xx and
no error event but the deliberate ones, no KV block in use, RSS and descriptors flat after
warm-up (the last third within 5 % of the second, plus a small absolute slack for short runs),
and every kill recorded as a recovery.
"""
import argparse
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from server_log import LISTENING, PUBLISHED, printed_ports

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("ORZO_SHARED", os.path.join(ROOT, "..", "shared"))
STORIES = os.path.join(SHARED, "models", "stories260K", "stories260K.gguf")
PROMPTS = ["Once upon a time", "The little dog", "Lily and Ben went to the park", "One day, a girl", "Tom had a ball"]


def proc_status(pid):
    """(RSS bytes, open descriptors) of a live process, else (0, 0)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
        return rss, len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, StopIteration):
        return 0, 0


def http(port, method, path, body=None, timeout=120):
    """One request on its own connection: (status, body bytes)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    data = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else b"")
    s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
              f"{len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
    f = s.makefile("rb")
    status = int(f.readline().split()[1])
    length, chunked = None, False
    while True:
        line = f.readline()
        if line in (b"\r\n", b""):
            break
        k, _, v = line.decode().partition(":")
        if k.lower() == "content-length":
            length = int(v)
        if k.lower() == "transfer-encoding" and "chunked" in v:
            chunked = True
    if chunked:
        out = b""
        while True:
            size = int(f.readline().strip(), 16)
            if size == 0:
                break
            out += f.read(size)
            f.read(2)
    else:
        out = f.read(length) if length is not None else f.read()
    s.close()
    return status, out


def metrics(port):
    _, body = http(port, "GET", "/metrics", timeout=10)
    values = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[re.sub(r"\{.*", "", name) + (re.search(r'finished_reason="(\w+)"', name) or [""])[0]] = float(value)
    return values


class Stream:
    """A streaming request read event by event: its terminal events, and when its first token came."""

    def __init__(self, port, body, rcvbuf=None):
        self.sock = socket.socket()
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(300)
        self.sock.connect(("127.0.0.1", port))
        data = json.dumps(body).encode()
        self.start = time.time()
        self.sock.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        self.f = self.sock.makefile("rb")
        self.status = int(self.f.readline().split()[1])
        while self.f.readline() not in (b"\r\n", b""):
            pass
        self.first_token = None
        self.finishes, self.errors = 0, []

    def events(self):
        while True:
            size = int(self.f.readline().strip(), 16)
            if size == 0:
                return
            chunk = self.f.read(size)
            self.f.read(2)
            for line in chunk.decode().split("\n"):
                if line.startswith("data: ") and line[6:] != "[DONE]":
                    yield json.loads(line[6:])

    def read(self, max_events=None):
        n = 0
        for ev in self.events():
            if "error" in ev:
                self.errors.append(ev["error"])
            for c in ev.get("choices", []):
                if c.get("text") and self.first_token is None:
                    self.first_token = time.time()
                if c.get("finish_reason"):
                    self.finishes += 1
            n += 1
            if max_events and n >= max_events:
                return False
        return True

    def close(self):
        self.sock.close()


class Soak:
    def __init__(self, a):
        self.a = a
        self.lock = threading.Lock()
        self.records = []  # (kind, start, end, outcome, ttft or None)
        self.samples = []
        self.kills = 0
        self.stop = threading.Event()
        orzo = os.path.join(a.build, "cli", "orzo")
        self.orzo = orzo
        self.log = tempfile.TemporaryFile()  # the server's stderr, where it prints its ports
        self.server = subprocess.Popen(
            [orzo, "serve", "-m", a.model, "--port", "0", "--served-model-name", "soak", "-t", "1",
             "--placement", f"cpu:0-{a.split},remote:{a.split}-{a.layers}", "--publish", "0",
             "--max-num-seqs", str(a.max_num_seqs), "--stream-buffer", "8192", "--stalled-client-timeout", "20",
             "--heartbeat-ms", "200", "--connection-timeout-ms", "1000", "--stats-interval", "0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log)
        try:
            self.port, self.publish = printed_ports(self.server, self.log, LISTENING, PUBLISHED)
        except RuntimeError:
            self.server.kill()
            raise
        self.worker = None
        self.start_worker()

    def start_worker(self):
        self.worker = subprocess.Popen(
            [self.orzo, "worker", "--connect", f"127.0.0.1:{self.publish}", "--connect-wait", "60", "--layers",
             f"{self.a.split}-{self.a.layers}", "-m", self.a.model, "-t", "1", "--heartbeat-ms", "200",
             "--connection-timeout-ms", "1000"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)

    def healthy(self):
        try:
            return http(self.port, "GET", "/health", timeout=5)[0] == 200
        except OSError:
            return False

    def record(self, kind, start, outcome, ttft=None):
        with self.lock:
            self.records.append((kind, start, time.time(), outcome, ttft))

    def body(self, stream, max_tokens=None):
        return {"model": "soak", "prompt": random.choice(PROMPTS), "max_tokens": max_tokens or random.randint(16, 200),
                "temperature": random.choice([0, 0.8]), "seed": random.randint(0, 1 << 30), "ignore_eos": True,
                "stream": stream}

    def client(self, seed):
        rnd = random.Random(seed)
        while not self.stop.is_set():
            kind = rnd.choices(["stream", "whole", "disconnect", "malformed"], [50, 33, 9, 8])[0]
            start = time.time()
            try:
                if kind == "stream":
                    s = Stream(self.port, self.body(True))
                    s.read()
                    s.close()
                    ok = s.status == 200 and s.finishes + len(s.errors) == 1 and not s.errors
                    self.record(kind, start, "ok" if ok else f"bad:{s.status}:{s.finishes}:{s.errors[:1]}",
                                s.first_token - start if s.first_token else None)
                elif kind == "whole":
                    status, out = http(self.port, "POST", "/v1/completions", self.body(False))
                    reply = json.loads(out)
                    ok = status == 200 and reply["choices"][0]["finish_reason"] == "length"
                    self.record(kind, start, "ok" if ok else f"bad:{status}:{out[:120]!r}")
                elif kind == "disconnect":
                    s = Stream(self.port, self.body(True, 200))
                    s.read(max_events=rnd.randint(1, 20))
                    s.close()
                    self.record(kind, start, "ok" if s.status == 200 else f"bad:{s.status}")
                else:
                    body = rnd.choice([b'{"model": "soak", "prompt": ', json.dumps(dict(self.body(False), temperature=-1)),
                                       json.dumps(dict(self.body(False), model="nope")), b"[1, 2]"])
                    status, _ = http(self.port, "POST", "/v1/completions", body if isinstance(body, bytes) else body.encode())
                    self.record(kind, start, "ok" if status in (400, 404) else f"bad:{status}")
            except (OSError, ValueError) as e:
                self.record(kind, start, f"bad:{type(e).__name__}:{e}")

    def stalled_readers(self):
        n = 0
        while not self.stop.wait(self.a.stall_every):
            n += 1
            start = time.time()
            try:
                s = Stream(self.port, dict(self.body(True, 400), n=2), rcvbuf=1024)
                s.read(max_events=2)
                time.sleep(3)
                if n % 2:
                    s.read()
                    ok = s.finishes + len(s.errors) == 2 and not s.errors
                    self.record("stalled", start, "ok" if ok else f"bad:{s.finishes}:{s.errors[:1]}")
                else:
                    self.record("stalled", start, "ok")  # left without reading: the server cancels it
                s.close()
            except (OSError, ValueError) as e:
                self.record("stalled", start, f"bad:{type(e).__name__}:{e}")

    def killer(self):
        while not self.stop.wait(self.a.kill_every):
            self.worker.send_signal(signal.SIGKILL)
            self.worker.wait()
            self.kills += 1
            self.start_worker()

    def sampler(self, t0):
        while not self.stop.wait(1.0):
            try:
                m = metrics(self.port)
            except (OSError, ValueError):
                continue
            rss, fds = proc_status(self.server.pid)
            wrss, wfds = proc_status(self.worker.pid)
            self.samples.append({"t": time.time() - t0, "rss": rss, "fds": fds, "worker_rss": wrss, "worker_fds": wfds,
                                 "kv": m.get("orzo:kv_cache_usage_perc", 0), "running": m.get("orzo:num_requests_running", 0),
                                 "waiting": m.get("orzo:num_requests_waiting", 0),
                                 "paused": m.get("orzo:num_requests_paused", 0),
                                 "recoveries": m.get("orzo:recoveries_total", 0)})

    def run(self):
        deadline = time.time() + 120
        while not self.healthy():
            if time.time() > deadline or self.server.poll() is not None:
                raise RuntimeError("the server did not get healthy")
            time.sleep(0.2)
        t0 = time.time()
        threads = [threading.Thread(target=self.client, args=(i,)) for i in range(3 * self.a.max_num_seqs)]
        threads += [threading.Thread(target=f) for f in (self.stalled_readers, self.killer)]
        threads.append(threading.Thread(target=self.sampler, args=(t0,)))
        for t in threads:
            t.start()
        self.stop.wait(self.a.duration)
        self.stop.set()
        for t in threads:
            t.join(600)
        # Idle: whatever a stalled or left reader held is cancelled by then.
        deadline = time.time() + 60
        while time.time() < deadline:
            m = metrics(self.port)
            if m.get("orzo:num_requests_running", 1) + m.get("orzo:num_requests_waiting", 1) + \
                    m.get("orzo:num_requests_paused", 1) == 0 and m.get("orzo:kv_cache_usage_perc", 1) == 0:
                break
            time.sleep(0.5)
        self.final = metrics(self.port)
        return t0

    def shutdown(self):
        for p in (self.worker, self.server):
            if p and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(60)
                except subprocess.TimeoutExpired:
                    p.kill()


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else None


def report(soak, t0, a):
    by_minute = {}
    for kind, start, end, outcome, ttft in soak.records:
        m = by_minute.setdefault(int((start - t0) // 60), {"requests": 0, "bad": 0, "ttft": [], "e2e": []})
        m["requests"] += 1
        m["bad"] += outcome != "ok"
        if ttft is not None:
            m["ttft"].append(ttft)
        if kind in ("stream", "whole"):
            m["e2e"].append(end - start)
    minutes = [{"minute": k, "requests": v["requests"], "bad": v["bad"],
                "ttft_p50": percentile(v["ttft"], 0.5), "ttft_p99": percentile(v["ttft"], 0.99),
                "e2e_p50": percentile(v["e2e"], 0.5), "e2e_p99": percentile(v["e2e"], 0.99)}
               for k, v in sorted(by_minute.items())]
    outcomes = {}
    for kind, _, _, outcome, _ in soak.records:
        key = kind + (":ok" if outcome == "ok" else ":bad")
        outcomes[key] = outcomes.get(key, 0) + 1
    bad = [r for r in soak.records if r[3] != "ok"]
    s = soak.samples
    third = max(1, len(s) // 3)

    def flat(key, slack):
        warm = [x[key] for x in s[third:2 * third]]
        late = [x[key] for x in s[2 * third:]]
        if not warm or not late:
            return True, None
        base = max(warm)
        return max(late) <= base * 1.05 + slack, {"warm_max": base, "late_max": max(late)}

    rss_ok, rss = flat("rss", 8 << 20)
    fds_ok, fds = flat("fds", 4)
    recoveries = soak.final.get("orzo:recoveries_total", 0)
    result = {
        "duration_s": a.duration, "clients": 3 * a.max_num_seqs, "max_num_seqs": a.max_num_seqs, "kills": soak.kills,
        "recoveries": recoveries, "recovery_pause_s": soak.final.get("orzo:recovery_pause_seconds_total", 0),
        "requests": len(soak.records), "outcomes": outcomes, "bad": [list(map(str, r)) for r in bad[:20]],
        "kv_in_use_at_end": soak.final.get("orzo:kv_cache_usage_perc"), "rss": rss, "fds": fds,
        "minutes": minutes, "samples": s,
        "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
    }
    checks = {
        "every request ended once, as it should": not bad,
        "no KV block in use at the end": result["kv_in_use_at_end"] == 0,
        # ASan's quarantine holds freed memory back by design: RSS grows under the sanitizers.
        "RSS flat after warm-up": rss_ok or bool(os.environ.get("ORZO_SANITIZED")),
        "descriptors flat after warm-up": fds_ok,
        "every kill recovered": recoveries >= soak.kills,
    }
    result["checks"] = checks
    return result


def plot(result, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib: no plot", file=sys.stderr)
        return
    s = result["samples"]
    t = [x["t"] / 60 for x in s]
    fig, ax = plt.subplots(4, 1, figsize=(9, 10), sharex=True)
    ax[0].plot(t, [x["rss"] / 2**20 for x in s], label="server RSS (MiB)")
    ax[0].plot(t, [x["worker_rss"] / 2**20 for x in s], label="worker RSS (MiB)")
    ax[1].plot(t, [x["fds"] for x in s], label="server fds")
    ax[2].plot(t, [x["kv"] * 100 for x in s], label="KV in use (%)")
    ax[2].plot(t, [x["running"] for x in s], label="running")
    ax[2].plot(t, [x["waiting"] for x in s], label="waiting")
    ax[2].plot(t, [x["paused"] for x in s], label="paused")
    m = result["minutes"]
    ax[3].plot([x["minute"] + 0.5 for x in m], [x["ttft_p99"] for x in m], "o-", label="TTFT p99 (s)")
    ax[3].plot([x["minute"] + 0.5 for x in m], [x["e2e_p99"] for x in m], "o-", label="e2e p99 (s)")
    for a in ax:
        a.legend(loc="upper left")
        a.grid(alpha=0.3)
    ax[3].set_xlabel("minutes")
    fig.suptitle(f"orzo soak: {result['requests']} requests, {result['kills']} worker kills")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model", default=STORIES)
    ap.add_argument("--layers", type=int, default=5, help="the model's layer count")
    ap.add_argument("--split", type=int, default=2, help="the remote worker serves layers split..layers")
    ap.add_argument("--duration", type=float, default=1800)
    ap.add_argument("--max-num-seqs", type=int, default=16)
    ap.add_argument("--kill-every", type=float, default=60)
    ap.add_argument("--stall-every", type=float, default=5)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "soak.json"))
    ap.add_argument("--plot", default=None)
    ap.add_argument("--check", action="store_true", help="exit 1 unless every check holds")
    a = ap.parse_args()
    if not os.path.exists(a.model):
        print(f"soak: no model at {a.model}", file=sys.stderr)
        return 77
    soak = Soak(a)
    try:
        t0 = soak.run()
    finally:
        soak.shutdown()
    result = report(soak, t0, a)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    if a.plot:
        plot(result, a.plot)
    summary = {k: result[k] for k in ("requests", "outcomes", "kills", "recoveries", "recovery_pause_s", "rss", "fds",
                                      "kv_in_use_at_end", "checks")}
    print(json.dumps(summary, indent=1))
    for m in result["minutes"]:
        print(f"minute {m['minute']}: {m['requests']} requests, {m['bad']} bad, TTFT p50/p99 "
              f"{m['ttft_p50']}/{m['ttft_p99']} s, e2e p50/p99 {m['e2e_p50']}/{m['e2e_p99']} s")
    for r in result["bad"]:
        print("bad:", r)
    return 0 if not a.check or all(result["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
