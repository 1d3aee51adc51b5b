#!/usr/bin/env python3
"""The quantized types on the CPU: each figure beside its ceiling, measured in one run.

    python3 bench/run_quant.py [--build build] [--types q8_0,q4_k,...] [--out bench/results/quant.json]

For each GGUF block type, the random-weight `small` shape (dim 1024, FFN 2816, 8 layers,
vocab 32000) written in that type by orzo-make-model, and SmolLM2-135M-Instruct's real
Q4_1 file from ../shared: single-stream decode (prompt 128) against the bandwidth roofline
(the quantized bytes a token reads / the read bandwidth, of a fresh buffer and of the
model's own mapped weights, measured right before), prefill of 512 tokens and decode of 32
sequences against the sgemm rate measured right before (the f32 ceiling: what the integer
paths must beat); each in both activation modes (f32, and --int8-activations). Best of 3
for every figure and ceiling. Prints a markdown table.
"""
import argparse
import json
import os
import time

from bench_models import ROOT
from machine import cpu_model
import run_cpu
from run_cpu import ceilings, decode_bytes_per_token, flops_per_token, run

TYPES = ["Q4_K_M", "q8_0", "q6_k", "q5_k", "q5_0", "q5_1", "q4_k", "q4_0", "q4_1", "iq4_nl", "iq4_xs", "q3_k", "q2_k"]
SMOLLM2 = os.path.join(os.path.dirname(ROOT), "shared", "models", "smollm2-135m-instruct",
                       "SmolLM2-135M-Instruct.Q4_1.gguf")


def small_model(build, models, dtype):
    """One type throughout from orzo-make-model; a llama.cpp mix (Q4_K_M, ...) by `orzo
    quantize` of the F16 model, choosing per tensor as llama.cpp's quantizer does."""
    path = os.path.join(models, f"small-{dtype}.gguf")
    if not os.path.exists(path):
        if dtype.isupper():
            run([f"{build}/cli/orzo", "quantize", small_model(build, models, "f16"), path, dtype])
        else:
            run([f"{build}/tools/orzo-make-model", "--shape", "small", "--dtype", dtype, "--format", "gguf",
                 "--out", path])
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default=os.path.join(ROOT, "models"))
    ap.add_argument("--types", default=",".join(TYPES))
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--tries", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "quant.json"))
    args = ap.parse_args()
    modes = [("f32", []), ("int8", ["--int8-activations"])]

    def bench(model, batch, prompt, gen, key, flags):
        return run_cpu.bench(args.build, model, batch, prompt, gen, args.threads, key, args.tries, flags)
    os.makedirs(args.models, exist_ok=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    models = [(t.upper() + ", small shape", small_model(args.build, args.models, t)) for t in args.types.split(",") if t]
    if os.path.exists(SMOLLM2):
        models.append(("SmolLM2-135M-Instruct Q4_1 (real file)", SMOLLM2))

    rows = []
    for label, model in models:
        for mode, flags in modes:
            bw, _ = ceilings(args.build, "ReadBandwidth")
            d = bench(model, 1, 128, 32, "decode_tps", flags)
            bytes_per_token = decode_bytes_per_token(d)
            roof_buffer, roof_mapped = bw / bytes_per_token, d["weight_read_bytes_per_s"] / bytes_per_token
            _, sgemm = ceilings(args.build, "Sgemm")
            p = bench(model, 1, 512, 0, "prefill_tps", flags)
            b = bench(model, 32, 128, 32, "decode_tps", flags)
            flops = flops_per_token(p, 1.0 / 512)
            rows.append({"what": f"{label}, {mode} activations", "decode_tps": d["decode_tps"],
                         "roofline_buffer_tps": roof_buffer, "roofline_mapped_tps": roof_mapped,
                         "bytes_per_token": bytes_per_token, "prefill_tps": p["prefill_tps"],
                         "prefill_sgemm_ceiling_tps": sgemm / flops, "decode32_tps": b["decode_tps"],
                         "sgemm_flops": sgemm, "read_bandwidth": bw, "runs": {"decode": d, "prefill": p, "decode32": b}})

    result = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu_model(),
              "cpus": os.cpu_count(), "rows": rows}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"{result['cpu']}, {result['cpus']} CPUs, {result['date']}\n")
    print("| model | decode 1 seq tok/s | of roofline (buffer / mapped) | prefill 512 tok/s | of sgemm ceiling | decode 32 seqs tok/s |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['what']} | {r['decode_tps']:.1f} | {100 * r['decode_tps'] / r['roofline_buffer_tps']:.0f} % / "
              f"{100 * r['decode_tps'] / r['roofline_mapped_tps']:.0f} % | {r['prefill_tps']:.0f} | "
              f"{100 * r['prefill_tps'] / r['prefill_sgemm_ceiling_tps']:.0f} % | {r['decode32_tps']:.0f} |")


if __name__ == "__main__":
    main()
