#!/usr/bin/env python3
"""Async scheduling against stepping one step at a time, beside the bare forward pass.

    python3 bench/run_async.py [--build build] [--tries 15] [--out bench/results/async-scheduling.json]

For stories260K (steps of tens to hundreds of microseconds, where host overhead shows) and the
`small` random shape (models/small-f16.gguf, made if missing; steps of milliseconds), at 1, 4,
16 and 64 concurrent sessions of 32 prompt + G generated tokens, `--threads` compute threads
(1: the other core is left to the actors, as bench/run_serve.py does): the actors one step at
a time (`--no-async-scheduling`) and planning ahead (the default), each in one process that runs `--tries`
rounds of the bare forward pass and the actors in turn on the same weights
(`orzo bench --actors --beside-bare --rounds N`), so that each actors / bare ratio compares
runs a few milliseconds apart (runs this short swing by 2x between processes on a shared VM).
Figures are whole-job generated tokens per second (prefill included) on every side, the
medians of the rounds. Then the null backend (no math: host cost alone) at 1, 64 and 256
sessions, both ways. Records the CPU and orzo's kernel level; prints markdown tables for
docs/BENCHMARKS.md.
"""
import argparse
import json
import os
from statistics import median

from bench_models import ROOT, STORIES, small_f16
from run_actors import orzo_bench


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "async-scheduling.json"))
    ap.add_argument("--tries", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    small = small_f16(a.build)

    rows, cpu = [], {}
    for name, model, gen in (("stories260K", STORIES, 400), ("small-f16", small, 16)):
        for batch in (1, 4, 16, 64):
            common = ["-m", model, "--batch", batch, "--prompt", 32, "--gen", gen, "--threads", a.threads,
                      "--actors", "--beside-bare", "--rounds", a.tries]
            one = orzo_bench(a.build, *common, "--no-async-scheduling")
            ahead = orzo_bench(a.build, *common)
            cpu = {"cpu": one["cpu"], "cpu_isa": one["cpu_isa"]}
            ratio = lambda r: median(x["actors_over_bare"] for x in r["rounds"])
            rows.append({"model": name, "batch": batch,
                         "bare": median(x["bare_tps"] for x in one["rounds"] + ahead["rounds"]),
                         "one_at_a_time": median(x["tokens_delivered_per_s"] for x in one["rounds"]),
                         "async": median(x["tokens_delivered_per_s"] for x in ahead["rounds"]),
                         "one_over_bare": ratio(one), "async_over_bare": ratio(ahead),
                         "rounds": {"one_at_a_time": one["rounds"], "async": ahead["rounds"]}})

    null = []
    for batch in (1, 64, 256):
        for flag in (["--no-async-scheduling"], []):
            runs = [orzo_bench(a.build, "--backend", "null", "--batch", batch, "--prompt", 16, "--gen", 4096, *flag)
                    for _ in range(a.tries)]
            r = sorted(runs, key=lambda x: x["tokens_delivered_per_s"])[len(runs) // 2]
            null.append({"batch": batch, "async": not flag, "us_per_step": r["us_per_step"],
                         "tokens_delivered_per_s": r["tokens_delivered_per_s"], "worker_thread": r["worker_thread"]})

    with open(a.out, "w") as f:
        json.dump({"machine": cpu, "threads": a.threads, "paired": rows, "null_backend": null}, f, indent=1)
    print(f"CPU: {cpu.get('cpu')}, level {cpu.get('cpu_isa')}, {a.threads} compute thread(s), medians of {a.tries}\n")
    print("| model | sessions | bare, tok/s | actors one at a time | / bare | actors async | / bare |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['model']} | {r['batch']} | {r['bare']:,.0f} | {r['one_at_a_time']:,.0f} | "
              f"{r['one_over_bare']:.2f} | {r['async']:,.0f} | {r['async_over_bare']:.2f} |")
    print()
    print("| null backend: sessions | one at a time: µs per step | async: µs per step | tokens delivered/s (one / async) |")
    print("|---:|---:|---:|---:|")
    for one, ahead in zip(null[::2], null[1::2]):
        print(f"| {one['batch']} | {one['us_per_step']:.1f} | {ahead['us_per_step']:.1f} | "
              f"{one['tokens_delivered_per_s']:,.0f} / {ahead['tokens_delivered_per_s']:,.0f} |")


if __name__ == "__main__":
    main()
