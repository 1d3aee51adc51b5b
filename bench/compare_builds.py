#!/usr/bin/env python3
"""Two builds of `orzo`, side by side: the same `orzo bench --json` workloads, alternating
A and B so that the machine's drift falls on both, for PAIRS pairs. Prints each workload's
median for A and B and the ratio B / A, with the CPU it ran on.

  python3 bench/compare_builds.py --a OLD/orzo --b NEW/orzo --small models/small-f16.gguf [--pairs 3]
      [--also models/small-q8_0.gguf ...] [--a-flags "--cpu-isa avx2"] [--b-flags ...]

--also adds the three small-shape workloads for each further file (other dtypes of the small
shape); --a-flags / --b-flags are extra `orzo bench` flags for one side, so one binary can be
compared with itself (one ISA level against another). The small shape is `orzo-make-model --shape small --dtype f16 --format gguf` (dim 1024, 8 layers,
vocab 32000); stories260K and SmolLM2-135M-Instruct Q4_1 come from ../shared/models.
"""
import argparse
import json
import os
import statistics
import subprocess

from bench_models import STORIES
from machine import cpu_model
from run_scoring import SMOLLM2



def small_workloads(label, path):
    return [
        (f"{label}: prefill 512", ["-m", path, "--batch", 1, "--prompt", 512, "--gen", 0], "prefill_tps"),
        (f"{label}: decode 1 seq", ["-m", path, "--batch", 1, "--prompt", 128, "--gen", 64], "decode_tps"),
        (f"{label}: decode 32 seqs", ["-m", path, "--batch", 32, "--prompt", 128, "--gen", 32], "decode_tps"),
    ]


def workloads(small, also):
    # (name, orzo bench arguments, the figure it reports)
    extra = [w for path in also for w in small_workloads(os.path.basename(path).removesuffix(".gguf"), path)]
    return small_workloads("small f16", small) + extra + [
        ("stories260K: decode 16 seqs", ["-m", STORIES, "--batch", 16, "--prompt", 32, "--gen", 128], "decode_tps"),
        ("stories260K: decode 64 seqs", ["-m", STORIES, "--batch", 64, "--prompt", 32, "--gen", 128], "decode_tps"),
        ("stories260K: actors, 16 sessions",
         ["-m", STORIES, "--actors", "--batch", 16, "--prompt", 32, "--gen", 128], "tokens_delivered_per_s"),
        ("stories260K: actors, 64 sessions",
         ["-m", STORIES, "--actors", "--batch", 64, "--prompt", 32, "--gen", 128], "tokens_delivered_per_s"),
        ("null backend: actors, 64 sessions",
         ["--backend", "null", "--batch", 64, "--prompt", 16, "--gen", 2048], "tokens_delivered_per_s"),
        # A real file: one sequence at a long context, where attention outweighs the weights.
        ("SmolLM2 Q4_1: decode 1 seq at 4096", ["-m", SMOLLM2, "--batch", 1, "--prompt", 4096, "--gen", 64], "decode_tps"),
        ("SmolLM2 Q4_1: decode 32 seqs at 128", ["-m", SMOLLM2, "--batch", 32, "--prompt", 128, "--gen", 32], "decode_tps"),
    ]


def bench(binary, flags, args):
    out = subprocess.run([binary, "bench", "--json", *flags.split(), *map(str, args)], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="the first orzo binary (the baseline)")
    ap.add_argument("--b", required=True, help="the second orzo binary")
    ap.add_argument("--small", required=True, help="the small-shape F16 GGUF")
    ap.add_argument("--also", action="append", default=[], help="another small-shape GGUF (repeatable)")
    ap.add_argument("--a-flags", default="", help="extra orzo bench flags for A")
    ap.add_argument("--b-flags", default="", help="extra orzo bench flags for B")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--only", default="", help="run only the workloads whose name contains this")
    ap.add_argument("--out", help="write the runs as JSON here")
    a = ap.parse_args()

    rows = []
    for name, args, key in workloads(a.small, a.also):
        if a.only not in name:
            continue
        runs = {"a": [], "b": []}
        for _ in range(a.pairs):
            for side in ("a", "b"):
                runs[side].append(bench(getattr(a, side), getattr(a, side + "_flags"), args)[key])
        rows.append({"workload": name, "figure": key, **runs})

    print(f"CPU: {cpu_model()}; {a.pairs} pairs, A and B alternating")
    print(f"A: {a.a} {a.a_flags}".rstrip())
    print(f"B: {a.b} {a.b_flags}".rstrip())
    print("| workload | figure | A median | B median | B / A | A runs | B runs |")
    print("|---|---|---:|---:|---:|---|---|")
    for r in rows:
        ma, mb = statistics.median(r["a"]), statistics.median(r["b"])
        fmt = lambda xs: " ".join(f"{x:,.0f}" for x in xs)
        print(f"| {r['workload']} | {r['figure']} | {ma:,.1f} | {mb:,.1f} | {mb / ma:.3f} | {fmt(r['a'])} | {fmt(r['b'])} |")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"cpu": cpu_model(), "a": f"{a.a} {a.a_flags}".rstrip(), "b": f"{a.b} {a.b_flags}".rstrip(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
