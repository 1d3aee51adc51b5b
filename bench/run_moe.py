#!/usr/bin/env python3
"""Mixture-of-Experts decode on the CPU: each figure beside its ceiling, measured in one run.

    python3 bench/run_moe.py [--build build] [--types q4_k,q8_0] [--out bench/results/moe.json]

The random-weight `moe-small` shape of orzo-make-model: Qwen3-30B-A3B's experts (128 per
layer, 8 per token, FFN 3/8 of the width) at width 1024 and 8 layers, written in each type.
Single-stream decode (prompt 128) against the bandwidth roofline computed from the bytes a
token actually reads: attention, the router, the 8 experts it is routed to in each layer, one
embedding row, the LM head and its KV cache (`orzo bench --json`'s weight_bytes_per_token), over
the read bandwidth of a fresh buffer and of the model's own mapped weights, measured right
before. Decode of 32 sequences reports how many experts a step runs and for how many rows each
one's weights are read. Beside each, the dense `small` shape (dim 1024, FFN 2816, 8 layers) in
the same type, against its own roofline: what the type's kernels reach without experts. Best of
3 for every figure and ceiling. Prints a markdown table.
"""
import argparse
import json
import os
import time

from bench_models import ROOT
import run_cpu
from run_cpu import ceilings, decode_bytes_per_token, run
from machine import cpu_model


def made_model(build, models, shape, dtype):
    path = os.path.join(models, f"{shape}-{dtype}.gguf")
    if not os.path.exists(path):
        run([f"{build}/tools/orzo-make-model", "--shape", shape, "--dtype", dtype, "--format", "gguf", "--out", path])
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default=os.path.join(ROOT, "models"))
    ap.add_argument("--types", default="q4_k,q8_0")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--tries", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "moe.json"))
    args = ap.parse_args()
    os.makedirs(args.models, exist_ok=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)

    rows = []
    for dtype in [t for t in args.types.split(",") if t]:
        for shape in ("moe-small", "small"):
            model = made_model(args.build, args.models, shape, dtype)
            bw, _ = ceilings(args.build, "ReadBandwidth")
            d = run_cpu.bench(args.build, model, 1, 128, 32, args.threads, "decode_tps", args.tries)
            bytes_per_token = decode_bytes_per_token(d)
            row = {"what": f"{shape} {dtype.upper()}", "decode_tps": d["decode_tps"],
                   "bytes_per_token": bytes_per_token, "roofline_buffer_tps": bw / bytes_per_token,
                   "roofline_mapped_tps": d["weight_read_bytes_per_s"] / bytes_per_token, "read_bandwidth": bw,
                   "runs": {"decode": d}}
            if shape == "moe-small":
                b = run_cpu.bench(args.build, model, 32, 128, 32, args.threads, "decode_tps", args.tries)
                row.update({"decode32_tps": b["decode_tps"], "decode32_experts": b["decode_experts"],
                            "decode1_experts": d["decode_experts"]})
                row["runs"]["decode32"] = b
            rows.append(row)

    result = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu_model(),
              "cpus": os.cpu_count(), "rows": rows}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"{result['cpu']}, {result['cpus']} CPUs, {result['date']}\n")
    print("| model | bytes a token reads | decode 1 seq tok/s | of roofline (buffer / mapped) | "
          "decode 32 seqs tok/s | experts run per layer and step | rows per expert read |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        e = r.get("decode32_experts")
        batched = (f"{r['decode32_tps']:.0f} | {e['run_per_layer_step']:.1f} of 128 | {e['rows_per_expert_read']:.2f}"
                   if e else "| |")
        print(f"| {r['what']} | {r['bytes_per_token'] / 1e6:.1f} MB | {r['decode_tps']:.1f} | "
              f"{100 * r['decode_tps'] / r['roofline_buffer_tps']:.0f} % / "
              f"{100 * r['decode_tps'] / r['roofline_mapped_tps']:.0f} % | {batched} |")


if __name__ == "__main__":
    main()
