#!/usr/bin/env python3
"""The CPU benchmark of record: ceilings and model throughput measured in one run.

    python3 bench/run_cpu.py [--build build] [--out bench/results/cpu.json]

Generates (once, into models/) random-weight Llama models shaped like Llama-3.2-1B and a
smaller one, in GGUF and safetensors, then runs `orzo bench` (best of 5) and reports each
number against its ceiling (best of 5), measured right before it:
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


def ceilings(build, only=None, repetitions=5):
    # A ceiling is the best this machine does: the highest of several repetitions (this VM's
    # bandwidth moves with each allocation).
    cmd = [f"{build}/bench/ceilings_bench", "--benchmark_format=json", f"--benchmark_repetitions={repetitions}"]
    if only:
        cmd.append(f"--benchmark_filter={only}")
    out = json.loads(run(cmd))
    read_bw = sgemm = 0.0
    for b in out["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        if b["name"].startswith("BM_ReadBandwidth"):
            read_bw = max(read_bw, b["bytes_per_second"])
        elif b["name"].startswith("BM_SgemmMultiThreaded"):
            sgemm = max(sgemm, b["FLOPS"])
    return read_bw, sgemm


def decode_bytes_per_token(r):
    """Bytes a decode token reads, from an `orzo bench --json` record: every weight matrix once,
    one embedding row, and the KV cache at the mean context of the decode."""
    context = r["prompt"] + r["gen"] / 2
    return r["weight_bytes_per_token"] + r["kv_bytes_per_token_per_position"] * context


def flops_per_token(r, lm_head_share):
    """Flops a token costs in matrix products, from an `orzo bench --json` record: every layer
    matrix, plus the LM head for the share of rows that produce logits (1 for decode rows;
    1 / prompt for a prefill, where only a sequence's last row does)."""
    return 2.0 * (r["layer_parameters"] + lm_head_share * r["lm_head_parameters"])


def bench(build, model, batch, prompt, gen, threads, key, tries=5, extra=()):
    """The best of `tries` runs by `key`: like the ceilings, what the machine can do. `extra`:
    more `orzo bench` flags (e.g. --int8-activations)."""
    cmd = [f"{build}/cli/orzo", "bench", "-m", model, "--batch", str(batch), "--prompt", str(prompt),
           "--gen", str(gen), "--json", *extra]
    if threads:
        cmd += ["--threads", str(threads)]
    return max((json.loads(run(cmd)) for _ in range(tries)), key=lambda r: r[key])


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

    read_bw, sgemm = ceilings(args.build)  # for the record; each row has its own below
    rows = []

    # This VM's memory bandwidth and compute rate drift by tens of percent over minutes, so
    # each measurement is paired with its ceiling measured right before it.
    def decode_row(label, model):
        bw, _ = ceilings(args.build, "ReadBandwidth")
        r = bench(args.build, model, 1, 16, 32, args.threads, "decode_tps")
        bytes_per_token = decode_bytes_per_token(r)
        # Two ceilings: the bandwidth of a fresh 1 GiB buffer, and that of the model's own
        # mapped weights (what decode really reads; on this VM they can differ by 1.5x).
        for source, rate in (("1 GiB buffer", bw), ("mapped weights", r["weight_read_bytes_per_s"])):
            ceiling = rate / bytes_per_token
            rows.append({"what": f"{label}, vs {source} bandwidth {rate / 1e9:.1f} GB/s",
                         "tokens_per_s": r["decode_tps"], "ceiling_tokens_per_s": ceiling,
                         "fraction": r["decode_tps"] / ceiling, "read_bandwidth_bytes_per_s": rate, "run": r})

    # Flops a token costs in matrix products: every layer matrix, plus the LM head for the
    # rows that produce logits (all decode rows; one row per sequence in a prefill).
    def compute_row(label, model, batch, prompt, gen, key, lm_head_share):
        _, rate = ceilings(args.build, "Sgemm")
        r = bench(args.build, model, batch, prompt, gen, args.threads, key)
        flops = flops_per_token(r, lm_head_share)
        rows.append({"what": label, "tokens_per_s": r[key], "ceiling_tokens_per_s": rate / flops,
                     "fraction": flops * r[key] / rate, "sgemm_flops": rate, "run": r})

    for label, model in (("1B-shape GGUF", big_gguf), ("1B-shape safetensors", big_st)):
        decode_row(f"single-stream decode, {label} F16", model)
    for label, model in (("small GGUF", small_gguf), ("small safetensors", small_st)):
        compute_row(f"prefill 512 tokens, {label} F16", model, 1, 512, 0, "prefill_tps", 1.0 / 512)
    for batch in (1, 4, 16, 32):
        compute_row(f"decode, {batch} sequences, small GGUF F16", small_gguf, batch, 32, 32, "decode_tps", 1.0)

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
