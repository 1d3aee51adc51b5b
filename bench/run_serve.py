#!/usr/bin/env python3
"""The OpenAI server's benchmark of record: `orzo serve` on stories260K, loaded by
bench/serve_bench (a C++ client in the style of `vllm bench serve`).

    python3 bench/run_serve.py [--build build] [--pairs 5] [-t 1] [--out bench/results/serve.json]
    python3 bench/run_serve.py --ab=FLAG [--pairs 3] [--out F]

1. Concurrency sweep: 1, 4, 16 and 64 streams in flight, 4 requests per stream, each a
   prompt of 32 random token ids (distinct, so the prefix cache has nothing to reuse) and
   128 generated tokens (ignore_eos, greedy). Output-token throughput and TTFT p50 against
   concurrency are plotted to bench/results/serve_throughput.png (beside --out where --out
   names another record).
2. The server against the actor path on the same job, alternately (a fresh server for each
   run, nothing else running): `orzo bench --actors` with 64 sessions of 32 prompt ids and
   128 tokens, and the server with 64 concurrent streams of the same. The server runs with
   the actor bench's batching (65 sequences, 512 tokens per step), so the engines do the
   same steps. Reported: the throughput ratio (whole job, prefill included, on both sides),
   and the HTTP + session cost per streamed token, measured two ways:
     - CPU: the server process's CPU time (/proc/PID/stat utime + stime) per generated
       token (generated tokens from /metrics) minus the actor bench's per token (its CPU
       time, less that of a 1-session 1-token run: process start, model load, warm-up);
     - wall: (server job time - actor job time) / tokens.
   Both sides use the same compute threads (-t, default 1: on a small shared machine, two
   compute threads that meet at a barrier every step wait out each other's time slices, and
   both the time and the CPU per token then measure the machine's load rather than the code).
   The client's own CPU per token is also recorded: on a small machine it competes with the
   server. Medians over the pairs are reported.

With `--ab FLAG`, instead: the concurrency sweep (1, 16 and 64 streams) on servers without
and with FLAG (e.g. `--no-async-scheduling`), --pairs times in turn, each side's median
output tokens/s and TTFT p50 printed and written to --out.
"""
import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from bench_models import ROOT, STORIES
from machine import cpu_model
from server_log import LISTENING, printed_ports

STORIES_VOCAB = 512  # random prompt ids are drawn from the whole vocabulary, as the actor bench does
PROMPT_LEN = 32
GEN = 128
SESSIONS = 64
MAX_NUM_SEQS = SESSIONS + 1  # what `orzo bench --actors` configures for --batch 64
STEP_TOKENS = 512            # its default --chunk


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def process_cpu(pid):
    """utime + stime of a running process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    """`orzo serve` on a port it picks and prints, from start until /health answers 200, to stop."""

    def __init__(self, build, threads, *flags):
        cmd = [f"{build}/cli/orzo", "serve", "-m", STORIES, "--host", "127.0.0.1", "--port", "0",
               "--max-num-seqs", str(MAX_NUM_SEQS), "--max-num-batched-tokens", str(STEP_TOKENS),
               "--max-queue", "1024", "-t", str(threads), *flags]
        log("+", " ".join(cmd))
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        try:
            self.port, = printed_ports(self.proc, self.log, LISTENING)
        except RuntimeError:
            self.stop()
            raise
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"orzo serve exited with {self.proc.returncode}: {self.output()}")
            try:
                with urllib.request.urlopen(self.url("/health"), timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"orzo serve did not become healthy in 120 s: {self.output()}")

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def output(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-2000:]

    def generated_tokens(self):
        """orzo:generation_tokens_total from /metrics."""
        with urllib.request.urlopen(self.url("/metrics"), timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("orzo:generation_tokens_total"):
                    return float(line.rsplit(" ", 1)[1])
        raise RuntimeError("/metrics has no orzo:generation_tokens_total")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def serve_bench(build, server, concurrency, num_prompts):
    """One serve_bench run against `server`; its report plus the CPU the server and the client spent."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [f"{build}/bench/serve_bench", "--port", str(server.port), "--num-prompts", str(num_prompts),
               "--concurrency", str(concurrency), "--random-input-len", str(PROMPT_LEN),
               "--random-vocab", str(STORIES_VOCAB), "--max-tokens", str(GEN), "--ignore-eos",
               "--temperature", "0", "--json", out.name]
        log("+", " ".join(cmd))
        tokens0, server0, client0 = server.generated_tokens(), process_cpu(server.proc.pid), children_cpu()
        run = subprocess.run(cmd, capture_output=True, text=True)
        server1, client1, tokens1 = process_cpu(server.proc.pid), children_cpu(), server.generated_tokens()
        if run.returncode != 0:
            raise RuntimeError(f"serve_bench failed ({run.returncode}): {run.stdout[-2000:]}{run.stderr[-2000:]}")
        r = json.load(open(out.name))
    # Both counts include serve_bench's test request, which has the measured requests' shape.
    r["server_cpu_s"] = server1 - server0
    r["server_generated_tokens"] = tokens1 - tokens0
    r["server_cpu_us_per_token"] = (server1 - server0) / (tokens1 - tokens0) * 1e6
    r["client_cpu_us_per_token"] = (client1 - client0) / (tokens1 - tokens0) * 1e6
    return r


def actor_bench(build, threads, batch, gen):
    cmd = [f"{build}/cli/orzo", "bench", "--actors", "--json", "-m", STORIES, "--batch", str(batch),
           "--prompt", str(PROMPT_LEN), "--gen", str(gen), "-t", str(threads)]
    log("+", " ".join(cmd))
    cpu0 = children_cpu()
    r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    r["cpu_s"] = children_cpu() - cpu0
    return r


def sweep(build, threads):
    rows = []
    with Server(build, threads) as server:
        for c in (1, 4, 16, 64):
            r = serve_bench(build, server, c, 4 * c)
            rows.append(r)
            log(f"  concurrency {c}: {r['output_throughput']:.0f} tok/s, TTFT p50 {r['median_ttft_ms']:.2f} ms")
    return rows


def ab(build, threads, flag, count):
    """Servers without and with `flag` in turn, `count` times: each side's sweep medians."""
    runs = {"without": [], "with": []}
    for _ in range(count):
        for side, flags in (("without", []), ("with", [flag])):
            with Server(build, threads, *flags) as server:
                runs[side].append([serve_bench(build, server, c, 4 * c) for c in (1, 16, 64)])
    out = {"flag": flag, "runs": runs, "median": {}}
    print(f"| streams | output tok/s without {flag} | with | TTFT p50 ms without | with |")
    print("|---:|---:|---:|---:|---:|")
    for i, c in enumerate((1, 16, 64)):
        m = {side: {k: statistics.median(run[i][k] for run in runs[side])
                    for k in ("output_throughput", "median_ttft_ms")} for side in runs}
        out["median"][c] = m
        print(f"| {c} | {m['without']['output_throughput']:,.0f} | {m['with']['output_throughput']:,.0f} | "
              f"{m['without']['median_ttft_ms']:.2f} | {m['with']['median_ttft_ms']:.2f} |")
    return out


def pairs(build, threads, count):
    out = []
    for k in range(count):
        with Server(build, threads) as server:
            s = serve_bench(build, server, SESSIONS, SESSIONS)
        a = actor_bench(build, threads, SESSIONS, GEN)
        base = actor_bench(build, threads, 1, 1)
        tokens = SESSIONS * GEN
        actor_cpu_per_token = (a["cpu_s"] - base["cpu_s"]) / tokens * 1e6
        p = {"serve_tps": s["output_throughput"], "actors_tps": a["tokens_delivered_per_s"],
             "serve_s": s["duration"], "actors_s": a["seconds"],
             "serve_cpu_us_per_token": s["server_cpu_us_per_token"],
             "actors_cpu_us_per_token": actor_cpu_per_token,
             "client_cpu_us_per_token": s["client_cpu_us_per_token"],
             "failed": s["failed"], "serve": s, "actors": a, "actors_baseline": base}
        p["ratio"] = p["serve_tps"] / p["actors_tps"]
        p["cpu_overhead_us_per_token"] = p["serve_cpu_us_per_token"] - actor_cpu_per_token
        p["wall_overhead_us_per_token"] = (p["serve_s"] - p["actors_s"]) / tokens * 1e6
        log(f"  pair {k + 1}: serve {p['serve_tps']:.0f} tok/s, actors {p['actors_tps']:.0f} tok/s, "
            f"ratio {p['ratio']:.3f}, CPU +{p['cpu_overhead_us_per_token']:.2f} us/token, "
            f"wall +{p['wall_overhead_us_per_token']:.2f} us/token")
        out.append(p)
    return out


def plot(rows, paired, threads, path):
    try:
        import matplotlib
    except ImportError:
        print(f"(no matplotlib: {path} not drawn; the tables and the JSON hold every figure)")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    conc = [r["max_concurrency"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(conc, [r["output_throughput"] for r in rows], "o-", label="orzo serve (HTTP, streamed)")
    left.plot([SESSIONS], [statistics.median(p["actors_tps"] for p in paired)], "s",
              label=f"orzo bench --actors, {SESSIONS} sessions (median)")
    left.set_xlabel("concurrent requests")
    left.set_ylabel("output tokens/s")
    left.set_ylim(bottom=0)
    left.legend(fontsize=8)
    right.plot(conc, [r["median_ttft_ms"] for r in rows], "o-")
    right.set_xlabel("concurrent requests")
    right.set_ylabel("TTFT p50 (ms)")
    right.set_ylim(bottom=0)
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(conc, [str(c) for c in conc])
        ax.grid(alpha=0.3)
    fig.suptitle(f"stories260K, {PROMPT_LEN} prompt + {GEN} generated tokens per request, "
                 f"{threads or os.cpu_count()} compute thread(s), {os.cpu_count()} CPUs")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "serve.json"))
    ap.add_argument("--png", help="the plot (default: bench/results/serve_throughput.png with the default --out, "
                                   "else beside --out, so that a check run leaves the plot of record alone)")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("-t", "--threads", type=int, default=1, help="compute threads, both sides (0: one per core)")
    ap.add_argument("--ab", metavar="FLAG", help="only compare servers without and with this flag, --pairs times")
    a = ap.parse_args()
    if a.ab:
        result = ab(a.build, a.threads, a.ab, a.pairs)
        result["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform(), "cpu": cpu_model()}
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)
        return
    if a.png is None:
        record = os.path.abspath(a.out) == os.path.join(ROOT, "bench", "results", "serve.json")
        a.png = (os.path.join(ROOT, "bench", "results", "serve_throughput.png") if record
                 else os.path.splitext(a.out)[0] + "_throughput.png")

    rows = sweep(a.build, a.threads)
    paired = pairs(a.build, a.threads, a.pairs)
    med = {k: statistics.median(p[k] for p in paired)
           for k in ("ratio", "cpu_overhead_us_per_token", "wall_overhead_us_per_token", "client_cpu_us_per_token",
                     "serve_tps", "actors_tps")}
    result = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                          "load_average_after": os.getloadavg()},
              "job": {"model": "stories260K", "prompt_tokens": PROMPT_LEN, "max_tokens": GEN, "ignore_eos": True,
                      "temperature": 0, "threads": a.threads},
              "sweep": rows, "serve_vs_actors": paired, "serve_vs_actors_median": med}
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    print("| concurrency | requests | output tok/s | total tok/s | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms "
          "| ITL p50 ms | E2E p50 ms | failed |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['max_concurrency']} | {r['completed']} | {r['output_throughput']:,.0f} | "
              f"{r['total_token_throughput']:,.0f} | {r['median_ttft_ms']:.2f} | {r['p99_ttft_ms']:.2f} | "
              f"{r['median_tpot_ms']:.3f} | {r['median_itl_ms']:.3f} | {r['median_e2el_ms']:.1f} | {r['failed']} |")
    print()
    print(f"| pair | serve tok/s | actors tok/s | serve / actors | server CPU µs/token | actors CPU µs/token "
          f"| CPU overhead µs/token | wall overhead µs/token | client CPU µs/token |")
    print("|---|---|---|---|---|---|---|---|---|")
    for k, p in enumerate(paired, 1):
        print(f"| {k} | {p['serve_tps']:,.0f} | {p['actors_tps']:,.0f} | {p['ratio']:.3f} | "
              f"{p['serve_cpu_us_per_token']:.2f} | {p['actors_cpu_us_per_token']:.2f} | "
              f"{p['cpu_overhead_us_per_token']:.2f} | {p['wall_overhead_us_per_token']:.2f} | "
              f"{p['client_cpu_us_per_token']:.2f} |")
    print(f"| median | {med['serve_tps']:,.0f} | {med['actors_tps']:,.0f} | {med['ratio']:.3f} | | | "
          f"{med['cpu_overhead_us_per_token']:.2f} | {med['wall_overhead_us_per_token']:.2f} | "
          f"{med['client_cpu_us_per_token']:.2f} |")
    plot(rows, paired, a.threads, a.png)


if __name__ == "__main__":
    main()
