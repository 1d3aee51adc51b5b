#!/usr/bin/env python3
"""The actor runtime's benchmark of record, every number measured side by side in one run.

    python3 bench/run_actors.py [--build build] [--out bench/results/actors.json]

1. Runtime overhead alone: `orzo bench --backend null` (no math) at batch 1, 64 and 256,
   4096 tokens per session, best of 5: in the decode phase (every session decoding), tokens
   delivered to sessions per second and microseconds of host time per step.
2. The actor path against the bare forward pass, on stories260K and on the `small` random
   shape (models/small-f16.gguf, made if missing): aggregate decode tokens/s at 1, 4, 16 and 64
   concurrent sessions, each size run bare then through the actors, alternately, best of 3.
3. Time to first token of new requests arriving while 63 others decode (stories260K).
Prints a markdown table for docs/BENCHMARKS.md.
"""
import argparse
import json
import os
import platform
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STORIES = os.path.join(os.path.dirname(ROOT), "shared", "models", "stories260K", "stories260K.gguf")


def run(cmd):
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def orzo_bench(build, *args):
    return run([f"{build}/cli/orzo", "bench", "--json", *map(str, args)])


def best(runs, key):
    return max(runs, key=lambda r: r[key])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "actors.json"))
    ap.add_argument("--tries", type=int, default=3)
    a = ap.parse_args()
    small = os.path.join(ROOT, "models", "small-f16.gguf")
    if not os.path.exists(small):
        os.makedirs(os.path.dirname(small), exist_ok=True)
        subprocess.run([f"{a.build}/tools/orzo-make-model", "--shape", "small", "--dtype", "f16", "--format", "gguf",
                        "--out", small], check=True)

    null = []
    for batch in (1, 64, 256):
        null.append(best([orzo_bench(a.build, "--backend", "null", "--batch", batch, "--prompt", 16, "--gen", 4096)
                          for _ in range(5)], "decode_tps"))

    paired = []
    for name, model, gen in (("stories260K", STORIES, 128), ("small-f16", small, 16)):
        for batch in (1, 4, 16, 64):
            bare, actors = [], []
            for _ in range(a.tries):
                common = ["-m", model, "--batch", batch, "--prompt", 32, "--gen", gen]
                bare.append(orzo_bench(a.build, *common))
                actors.append(orzo_bench(a.build, *common, "--actors"))
            b, s = best(bare, "decode_tps"), best(actors, "decode_tps")
            paired.append({"model": name, "batch": batch, "bare_decode_tps": b["decode_tps"],
                           "actors_decode_tps": s["decode_tps"], "ratio": s["decode_tps"] / b["decode_tps"]})

    ttft = orzo_bench(a.build, "--actors", "-m", STORIES, "--batch", 63, "--prompt", 32, "--gen", 400,
                      "--ttft-probes", 50)
    result = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
              "null_backend": null, "actors_vs_bare": paired, "ttft_while_63_decode": ttft}
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)

    print("| null backend, batch | decode: µs per step | decode: tokens delivered/s | whole run incl. admission: tokens/s |")
    print("|---|---|---|---|")
    for r in null:
        print(f"| {r['batch']} | {r['decode_us_per_step']:.1f} | {r['decode_tps']:,.0f} | {r['tokens_delivered_per_s']:,.0f} |")
    print()
    print("| model | sessions | bare forward pass, decode tokens/s | through the actors | actors / bare |")
    print("|---|---|---|---|---|")
    for r in paired:
        print(f"| {r['model']} | {r['batch']} | {r['bare_decode_tps']:,.1f} | {r['actors_decode_tps']:,.1f} | {r['ratio']:.3f} |")
    print()
    print(f"TTFT of new requests while 63 decode (stories260K, 32-token prompts, 50 probes): "
          f"p50 {ttft['ttft_p50_ms']:.2f} ms, p99 {ttft['ttft_p99_ms']:.2f} ms")


if __name__ == "__main__":
    main()
