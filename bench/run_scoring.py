#!/usr/bin/env python3
"""Prompt scoring against prefill, side by side in one run.

    python3 bench/run_scoring.py [--build build] [--model M] [--text T] [--ctx 512] [--pairs 3]

Alternates `orzo bench` (prefill of 4 sequences of --ctx tokens, --gen 1) and `orzo perplexity`
over an English text in windows of --ctx, --pairs times, and reports the medians. Scoring needs
the logits of every row, so its matrix products cost (layer + LM head) parameters a token where
a prefill's cost layer + LM head / ctx: the ceiling of scoring is the prefill rate measured
alongside, times that ratio (orzo bench --json gives both parameter counts).
"""
import argparse
import json
import os
import re
import statistics
import subprocess

from machine import cpu_model  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMOLLM2 = os.path.join(os.path.dirname(ROOT), "shared", "models", "smollm2-135m-instruct",
                       "SmolLM2-135M-Instruct.Q4_1.gguf")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model", default=SMOLLM2)
    ap.add_argument("--text", default=os.path.join(ROOT, "tests", "fixtures", "text", "english.txt"))
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args()
    orzo = os.path.join(args.build, "cli", "orzo")
    prefill, scoring, record = [], [], None
    for _ in range(args.pairs):
        record = json.loads(subprocess.run([orzo, "bench", "-m", args.model, "--batch", "4", "--prompt", str(args.ctx),
                                            "--gen", "1", "--json"], check=True, capture_output=True, text=True).stdout)
        prefill.append(record["prefill_tps"])
        run = subprocess.run([orzo, "perplexity", "-m", args.model, "-f", args.text, "--ctx", str(args.ctx)], check=True,
                             capture_output=True, text=True)
        scoring.append(float(re.search(r"\(([0-9.]+) tokens/s\)", run.stderr).group(1)))
    layers, head = record["layer_parameters"], record["lm_head_parameters"]
    share = (layers + head / args.ctx) / (layers + head)
    p, s = statistics.median(prefill), statistics.median(scoring)
    print(f"CPU {cpu_model()}, kernels {record['cpu_isa']}, {record['threads']} threads; {os.path.basename(args.model)}")
    print(f"prefill (orzo bench, 4 x {args.ctx}): {p:.0f} tokens/s  (runs: {', '.join(f'{x:.0f}' for x in prefill)})")
    print(f"scoring (orzo perplexity, windows of {args.ctx}): {s:.0f} tokens/s  "
          f"(runs: {', '.join(f'{x:.0f}' for x in scoring)})")
    print(f"scoring / prefill: {s / p:.2f}; ceiling (every row's LM head: {share:.2f} of prefill): {p * share:.0f} "
          f"tokens/s; scoring / ceiling: {s / (p * share):.2f}")


if __name__ == "__main__":
    main()
