#!/usr/bin/env python3
"""Gemma 3 270M (Q4_K_M, the real file) beside a Llama of its shape, on the CPU, in one run.

    python3 bench/run_gemma.py [--build build] [--tries 3] [--out bench/results/gemma.json]

The Gemma file comes from `../shared/models/fetch.sh gemma-3-270m-q4_k_m` (its cache, or
$ORZO_MODEL_CACHE). The Llama is `orzo-make-model` at Gemma 3 270M's sizes (width 640, FFN
2048, 18 layers, 4 heads over 1 KV head, vocabulary 262144, tied) re-encoded by
`orzo quantize ... Q4_K_M`, so both files hold the same mix of types (width 640 is no multiple
of 256: the K-quants fall back to Q5_0 in both) and differ by Gemma's terms (head_dim 256 for
Llama's 160, the sandwich norms, GeGLU, sliding layers). For each, alternating, best of
`--tries`: decode of 1 sequence (prompt 128, 32 tokens), prefill of 512 tokens, decode of 32
sequences (prompt 128). Prints a markdown table.
"""
import argparse
import json
import os
import time

from bench_models import ROOT
import run_cpu
from run_cpu import run
from machine import cpu_model


def gemma_file():
    cache = os.environ.get("ORZO_MODEL_CACHE", os.path.expanduser("~/.cache/orzo-models"))
    path = os.path.join(cache, "gemma-3-270m-q4_k_m", "gemma-3-270m-q4_k_m.gguf")
    if not os.path.exists(path):
        raise SystemExit(f"{path} is absent: ../shared/models/fetch.sh gemma-3-270m-q4_k_m")
    return path


def llama_of_its_shape(build, models):
    path = os.path.join(models, "llama-gemma270m-shape-Q4_K_M.gguf")
    if not os.path.exists(path):
        f16 = os.path.join(models, "llama-gemma270m-shape-f16.gguf")
        run([f"{build}/tools/orzo-make-model", "--shape", "tiny", "--dim", "640", "--hidden", "2048", "--layers", "18",
             "--heads", "4", "--kv-heads", "1", "--vocab", "262144", "--tied", "--dtype", "f16", "--format", "gguf",
             "--out", f16])
        run([f"{build}/cli/orzo", "quantize", f16, path, "Q4_K_M"])
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default=os.path.join(ROOT, "models"))
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--tries", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "gemma.json"))
    args = ap.parse_args()
    os.makedirs(args.models, exist_ok=True)
    models = [("Gemma 3 270M Q4_K_M (real file)", gemma_file()),
              ("Llama of its shape, Q4_K_M", llama_of_its_shape(args.build, args.models))]
    workloads = [("decode_tps", 1, 128, 32), ("prefill_tps", 1, 512, 0), ("decode_tps", 32, 128, 32)]
    best = {(m, w): None for m, _ in models for w in range(len(workloads))}
    for _ in range(args.tries):  # alternating: each try runs every model on every workload
        for label, path in models:
            for w, (key, batch, prompt, gen) in enumerate(workloads):
                r = run_cpu.bench(args.build, path, batch, prompt, gen, args.threads, key, 1)
                if best[(label, w)] is None or r[key] > best[(label, w)][key]:
                    best[(label, w)] = r
    rows = [{"what": label, "decode_tps": best[(label, 0)]["decode_tps"], "prefill_tps": best[(label, 1)]["prefill_tps"],
             "decode32_tps": best[(label, 2)]["decode_tps"],
             "weight_bytes_per_token": best[(label, 0)]["weight_bytes_per_token"]} for label, _ in models]
    result = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu_model(),
              "cpus": os.cpu_count(), "rows": rows}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"{result['cpu']}, {result['cpus']} CPUs, {result['date']}\n")
    print("| model | bytes a token reads | decode 1 seq tok/s | prefill 512 tok/s | decode 32 seqs tok/s |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['what']} | {r['weight_bytes_per_token'] / 1e6:.1f} MB | {r['decode_tps']:.1f} | "
              f"{r['prefill_tps']:.0f} | {r['decode32_tps']:.0f} |")


if __name__ == "__main__":
    main()
