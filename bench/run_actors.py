#!/usr/bin/env python3
"""The actor runtime's benchmark of record, every number measured side by side in one run.

    python3 bench/run_actors.py [--build build] [--out bench/results/actors.json]

1. Runtime overhead alone: `orzo bench --backend null` (no math) at batch 1, 64 and 256,
   4096 tokens per session, best of 5: tokens delivered to sessions per second and
   microseconds of host time per step, over the whole run (admission is a few steps of 4096).
2. The actor path against the bare forward pass, on stories260K and on the `small` random
   shape (models/small-f16.gguf, made if missing), at 1, 4, 16 and 64 concurrent sessions, each
   size run bare then through the actors, alternately, best of 3: generated tokens per second
   over the whole job, prefill included, on both sides. (The actors' "decode" figure starts
   when the last session sees its first token, which a session can see late while the batcher
   runs ahead, so only whole-job rates are compared.)
3. Time to first token of new requests arriving while 63 others decode (stories260K), with
   workers on threads of their own and on the scheduler's, alternately, 3 runs each.
Items 1 and 2's actor rows are also run both ways where it matters (1: both; 2: the default).
Prints a markdown table for docs/BENCHMARKS.md.
"""
import argparse
import json
import os
import platform
import subprocess
import sys

from bench_models import ROOT, STORIES, small_f16


def run(cmd):
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def orzo_bench(build, *args):
    return run([f"{build}/cli/orzo", "bench", "--json", *map(str, args)])


def bare_job_tps(r):
    """Generated tokens per second of a bare run, prefill and decode together."""
    seconds = r["batch"] * r["prompt"] / r["prefill_tps"] + r["batch"] * r["gen"] / r["decode_tps"]
    return r["batch"] * r["gen"] / seconds


def best(runs, key):
    return max(runs, key=lambda r: r[key])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "actors.json"))
    ap.add_argument("--tries", type=int, default=3)
    a = ap.parse_args()
    small = small_f16(a.build)

    null = []
    for thread in ("shared", "own"):
        for batch in (1, 64, 256):
            null.append(best([orzo_bench(a.build, "--backend", "null", "--worker-thread", thread, "--batch", batch,
                                         "--prompt", 16, "--gen", 4096) for _ in range(5)], "tokens_delivered_per_s"))

    paired = []
    for name, model, gen in (("stories260K", STORIES, 128), ("small-f16", small, 16)):
        for batch in (1, 4, 16, 64):
            bare, actors = [], []
            for _ in range(a.tries):
                common = ["-m", model, "--batch", batch, "--prompt", 32, "--gen", gen]
                bare.append(orzo_bench(a.build, *common))
                actors.append(orzo_bench(a.build, *common, "--actors"))
            b = max(bare_job_tps(r) for r in bare)
            s = max(r["tokens_delivered_per_s"] for r in actors)
            paired.append({"model": name, "batch": batch, "bare_tps": b, "actors_tps": s, "ratio": s / b})

    ttft = [orzo_bench(a.build, "--actors", "-m", STORIES, "--batch", 63, "--prompt", 32, "--gen", 400,
                       "--ttft-probes", 50, "--worker-thread", thread) for _ in range(3) for thread in ("own", "shared")]
    result = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
              "null_backend": null, "actors_vs_bare": paired, "ttft_while_63_decode": ttft}
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)

    print("| null backend: workers | batch | steps/s | µs per step | tokens delivered/s |")
    print("|---|---|---|---|---|")
    for r in null:
        print(f"| {r['worker_thread']} | {r['batch']} | {r['steps_per_s']:,.0f} | {r['us_per_step']:.1f} | "
              f"{r['tokens_delivered_per_s']:,.0f} |")
    print()
    print("| model | sessions | bare forward pass, tokens/s | through the actors, tokens/s | actors / bare |")
    print("|---|---|---|---|---|")
    for r in paired:
        print(f"| {r['model']} | {r['batch']} | {r['bare_tps']:,.1f} | {r['actors_tps']:,.1f} | {r['ratio']:.3f} |")
    print()
    print("| TTFT while 63 decode (stories260K, 50 probes): workers | p50 ms | p99 ms |")
    print("|---|---|---|")
    for r in ttft:
        print(f"| {r['worker_thread']} | {r['ttft_p50_ms']:.2f} | {r['ttft_p99_ms']:.2f} |")


if __name__ == "__main__":
    main()
