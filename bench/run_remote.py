#!/usr/bin/env python3
"""What the middleman hop costs a pipeline, side by side in one run.

    python3 bench/run_remote.py [--build build] [--out bench/results/remote.json]

The same two-stage placement runs twice per model and batch: both stages in one process
(`--placement cpu:0-A,cpu:A-N`), then the second stage in another process that joins through
the CAF middleman on loopback (`--placement cpu:0-A,remote:A-N --publish PORT` and
`orzo worker --layers A-N`). Each stage computes on one thread (-t 1) either way, so the
difference per step is the hop: stage 0's StepRequest, hidden states included, serialized,
sent over TCP, deserialized, and the StepResult sent back to the batcher. Workload: `orzo
bench --actors`, B sessions of 16 prompt tokens and G decode steps, best of N tries.
Bytes per decode step are the hidden states alone (B rows x hidden size x 4 bytes); the
rest of a StepRequest is ~20 bytes per row plus the block tables.
Prints a markdown table for docs/BENCHMARKS.md.
"""
import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time

from bench_models import ROOT, STORIES, small_f16
PORT = 47311


def bench(build, model, placement, batch, gen, worker_layers=None):
    cmd = [f"{build}/cli/orzo", "bench", "--actors", "--json", "-m", model, "--placement", placement, "--batch",
           str(batch), "--prompt", "16", "--gen", str(gen), "-t", "1"]
    worker = None
    if worker_layers:
        cmd += ["--publish", str(PORT)]
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        if worker_layers:
            time.sleep(0.5)
            wcmd = [f"{build}/cli/orzo", "worker", "--connect", f"127.0.0.1:{PORT}", "--layers", worker_layers, "-m",
                    model, "-t", "1"]
            print("+", " ".join(wcmd), file=sys.stderr, flush=True)
            worker = subprocess.Popen(wcmd, stderr=subprocess.DEVNULL)
        out, _ = proc.communicate(timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"bench failed ({proc.returncode})")
        return json.loads(out)
    finally:
        if worker:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "remote.json"))
    ap.add_argument("--tries", type=int, default=3)
    a = ap.parse_args()
    small = small_f16(a.build)
    # model, name, hidden size, layers, split, decode steps per batch size
    models = [(STORIES, "stories260K", 64, 5, 2, {1: 256, 64: 256}), (small, "small-f16", 1024, 8, 4, {1: 64, 64: 16})]
    rows = []
    for path, name, hidden, layers, split, gens in models:
        for batch in (1, 64):
            gen = gens[batch]
            one = [bench(a.build, path, f"cpu:0-{split},cpu:{split}-{layers}", batch, gen) for _ in range(a.tries)]
            two = [bench(a.build, path, f"cpu:0-{split},remote:{split}-{layers}", batch, gen, f"{split}-{layers}")
                   for _ in range(a.tries)]
            b1 = min(one, key=lambda r: r["us_per_step"])
            b2 = min(two, key=lambda r: r["us_per_step"])
            rows.append({"model": name, "batch": batch, "gen": gen, "hidden_bytes_per_decode_step": batch * hidden * 4,
                         "single": b1, "two_process": b2,
                         "hop_us_per_step": b2["us_per_step"] - b1["us_per_step"]})
    result = {"machine": platform.node(), "cores": os.cpu_count(), "time": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "rows": rows}
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    print("| model | batch | hidden bytes / decode step | µs/step, one process | µs/step, two processes | hop µs/step "
          "| tokens/s, one process | tokens/s, two processes |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        s, t = r["single"], r["two_process"]
        print(f"| {r['model']} | {r['batch']} | {r['hidden_bytes_per_decode_step']:,} | {s['us_per_step']:.0f} | "
              f"{t['us_per_step']:.0f} | {r['hop_us_per_step']:.0f} | {s['tokens_delivered_per_s']:.0f} | "
              f"{t['tokens_delivered_per_s']:.0f} |")


if __name__ == "__main__":
    main()
