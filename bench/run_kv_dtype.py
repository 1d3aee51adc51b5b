#!/usr/bin/env python3
"""The CPU KV cache in f32 (the default) against f16 (`--kv-cache-dtype f16`), in one run:
`orzo bench --json` workloads alternating the two, --pairs times, and `orzo perplexity` of
the English test text under each (what f16's rounding costs).

    python3 bench/run_kv_dtype.py [--build build] [--pairs 3] [--out bench/results/kv-dtype.json]

Workloads: SmolLM2-135M-Instruct Q4_1 (the real file in ../shared) decoding 8 sequences at
a 2048-token prompt, where each step reads 4x more KV than weights, and 32 sequences at 128;
its prefill of 512 and of 2048 (chunks that attend to up to 2048 positions); stories260K decoding 64 sequences at 32 (the serving test's shape).
Prints a markdown table of the medians, f16 / f32, and the CPU.
"""
import argparse
import json
import statistics
import subprocess

from bench_models import ROOT, STORIES
from machine import cpu_model
from run_scoring import SMOLLM2

WORKLOADS = [
    ("SmolLM2 Q4_1: decode 8 seqs at 2048", ["-m", SMOLLM2, "--batch", "8", "--prompt", "2048", "--gen", "32"], "decode_tps"),
    ("SmolLM2 Q4_1: decode 32 seqs at 128", ["-m", SMOLLM2, "--batch", "32", "--prompt", "128", "--gen", "32"], "decode_tps"),
    ("SmolLM2 Q4_1: prefill 512", ["-m", SMOLLM2, "--batch", "1", "--prompt", "512", "--gen", "0"], "prefill_tps"),
    ("SmolLM2 Q4_1: prefill 2048", ["-m", SMOLLM2, "--batch", "1", "--prompt", "2048", "--gen", "0"], "prefill_tps"),
    ("stories260K: decode 64 seqs at 32", ["-m", STORIES, "--batch", "64", "--prompt", "32", "--gen", "128"], "decode_tps"),
]
DTYPES = ["f32", "f16"]


def bench(orzo, args, dtype):
    out = subprocess.run([orzo, "bench", "--json", *args, "--kv-cache-dtype", dtype], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def perplexity(orzo, dtype):
    out = subprocess.run([orzo, "perplexity", "-m", SMOLLM2, "-f", f"{ROOT}/tests/fixtures/text/english.txt", "--ctx",
                          "512", "--kv-cache-dtype", dtype], check=True, capture_output=True, text=True)
    lines = [l for l in (out.stdout + out.stderr).splitlines() if l.startswith("perplexity ")]
    return lines[-1].strip() if lines else "(no perplexity line)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=f"{ROOT}/build")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--out")
    a = ap.parse_args()
    orzo = f"{a.build}/cli/orzo"
    runs = {name: {d: [] for d in DTYPES} for name, _, _ in WORKLOADS}
    for pair in range(a.pairs):
        for name, args, figure in WORKLOADS:
            order = DTYPES if pair % 2 == 0 else DTYPES[::-1]
            for dtype in order:
                runs[name][dtype].append(bench(orzo, args, dtype)[figure])
    ppl = {d: perplexity(orzo, d) for d in DTYPES}
    print(f"CPU: {cpu_model()}, {a.pairs} alternating pairs, medians (tokens/s)\n")
    print("| workload | KV f32 | KV f16 | f16 / f32 | runs f32 / f16 |\n|---|---:|---:|---:|---|")
    for name, _, _ in WORKLOADS:
        m = {d: statistics.median(runs[name][d]) for d in DTYPES}
        print(f"| {name} | {m['f32']:,.0f} | {m['f16']:,.0f} | {m['f16'] / m['f32']:.2f} | "
              f"{' / '.join(f'{x:,.0f}' for x in runs[name]['f32'])}; {' / '.join(f'{x:,.0f}' for x in runs[name]['f16'])} |")
    for d in DTYPES:
        print(f"\nperplexity, KV {d}: {ppl[d]}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"cpu": cpu_model(), "runs": runs, "perplexity": ppl}, f, indent=1)


if __name__ == "__main__":
    main()
