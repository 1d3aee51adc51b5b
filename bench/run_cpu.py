#!/usr/bin/env python3
"""The CPU benchmark of record: ceilings and model throughput measured in one run.

    python3 bench/run_cpu.py [--build build] [--out bench/results/cpu.json]

Generates (once, into models/) random-weight Llama models shaped like Llama-3.2-1B and a
smaller one, in GGUF and safetensors, measures the read bandwidth and the sgemm rate of
this machine, then runs `orzo bench` and reports each number against its ceiling:
decode against bytes read per token / bandwidth, prefill and batched decode against
2 x parameters x tokens/s / sgemm rate, counting the parameters each token
multiplies (layer matrices, and the LM head only for rows that produce logits). Prints a markdown table for docs/BENCHMARKS.md.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd):
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def ensure_model(build, shape, fmt, path):
    if not os.path.exists(path):
        run([f"{build}/tools/orzo-make-model", "--shape", shape, "--dtype", "f16", "--format", fmt, "--out", path])
    return path


def ceilings(build):
    # A ceiling is the best this machine does: the highest of several repetitions (this VM's
    # bandwidth moves with each allocation).
    out = json.loads(run([f"{build}/bench/ceilings_bench", "--benchmark_format=json",
                          "--benchmark_repetitions=5", "--benchmark_report_aggregates_only=false"]))
    read_bw = sgemm = 0.0
    for b in out["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        if b["name"].startswith("BM_ReadBandwidth"):
            read_bw = max(read_bw, b["bytes_per_second"])
        elif b["name"].startswith("BM_SgemmMultiThreaded"):
            sgemm = max(sgemm, b["FLOPS"])
    return read_bw, sgemm


def bench(build, model, batch, prompt, gen, threads):
    cmd = [f"{build}/cli/orzo", "bench", "-m", model, "--batch", str(batch), "--prompt", str(prompt),
           "--gen", str(gen), "--json"]
    if threads:
        cmd += ["--threads", str(threads)]
    return json.loads(run(cmd))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default=os.path.join(ROOT, "models"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "cpu.json"))
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    os.makedirs(args.models, exist_ok=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    m = args.models
    big_gguf = ensure_model(args.build, "llama-3.2-1b", "gguf", f"{m}/llama-3.2-1b-f16.gguf")
    big_st = ensure_model(args.build, "llama-3.2-1b", "safetensors", f"{m}/llama-3.2-1b-f16")
    small_gguf = ensure_model(args.build, "small", "gguf", f"{m}/small-f16.gguf")
    small_st = ensure_model(args.build, "small", "safetensors", f"{m}/small-f16")

    read_bw, sgemm = ceilings(args.build)
    rows = []

    def decode_row(label, r):
        context = r["prompt"] + r["gen"] / 2
        bytes_per_token = r["weight_bytes_per_token"] + r["kv_bytes_per_token_per_position"] * context
        ceiling = read_bw / bytes_per_token
        rows.append({"what": label, "tokens_per_s": r["decode_tps"], "ceiling_tokens_per_s": ceiling,
                     "fraction": r["decode_tps"] / ceiling, "run": r})

    # Flops a token costs in matrix products: every layer matrix, plus the LM head for the
    # rows that produce logits (all decode rows; one row per sequence in a prefill).
    def compute_row(label, r, tps, lm_head_share):
        flops_per_token = 2.0 * (r["layer_parameters"] + lm_head_share * r["lm_head_parameters"])
        rows.append({"what": label, "tokens_per_s": tps, "ceiling_tokens_per_s": sgemm / flops_per_token,
                     "fraction": flops_per_token * tps / sgemm, "run": r})

    for label, model in (("1B-shape GGUF", big_gguf), ("1B-shape safetensors", big_st)):
        decode_row(f"single-stream decode, {label} F16", bench(args.build, model, 1, 16, 32, args.threads))
    for label, model in (("small GGUF", small_gguf), ("small safetensors", small_st)):
        r = bench(args.build, model, 1, 512, 0, args.threads)
        compute_row(f"prefill 512 tokens, {label} F16", r, r["prefill_tps"], 1.0 / 512)
    for batch in (1, 4, 16, 32):
        r = bench(args.build, small_gguf, batch, 32, 32, args.threads)
        compute_row(f"decode, {batch} sequences, small GGUF F16", r, r["decode_tps"], 1.0)

    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "read_bandwidth_bytes_per_s": read_bw,
        "sgemm_2048_flops": sgemm,
        "rows": rows,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"read bandwidth {read_bw / 1e9:.2f} GB/s, sgemm 2048^3 {sgemm / 1e9:.1f} GFLOP/s\n")
    print("| measurement | tokens/s | ceiling tokens/s | fraction of ceiling |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['what']} | {r['tokens_per_s']:.1f} | {r['ceiling_tokens_per_s']:.1f} | {100 * r['fraction']:.0f} % |")


if __name__ == "__main__":
    main()
