#!/usr/bin/env python3
"""Gemma 3 270M (Q4_K_M, the real file): the KV layout that keeps the sliding layers' window
only (the default) against one table for every layer (`--no-hybrid-kv`), in one run.

    python3 bench/run_kv_layout.py [--build build] [--words 6000] [--pairs 3]
                                   [--out bench/results/kv-layout.json]

Each run is `orzo generate` of 32 tokens after a prompt of about --words words (the English
test text, repeated: 6000 words are 6,691 tokens), one thread, at the model's 32768-token
context and the CPU's default KV budget; the two layouts alternate, --pairs times. Recorded
per run: the KV pool `orzo` states (MiB, blocks, how many 32768-token sequences it holds at
once), prefill and decode tokens/s, peak resident memory (`/usr/bin/time`'s %M) and whether
the greedy text is the same in both layouts. The Gemma file comes from
`../shared/models/fetch.sh gemma-3-270m-q4_k_m`. Prints a markdown table of the medians.
"""
import argparse
import json
import os
import re
import statistics
import subprocess

from bench_models import ROOT
from machine import cpu_model
from run_gemma import gemma_file


def long_prompt(words):
    with open(os.path.join(ROOT, "tests", "fixtures", "text", "english.txt")) as f:
        text = f.read().split()
    return " ".join((text * (words // len(text) + 1))[:words])


STATS = re.compile(r"prompt (\d+) tokens in [\d.]+ ms \(([\d.]+) tokens/s\); generated \d+ tokens in [\d.]+ ms \(([\d.]+) tokens/s\)")
POOL = re.compile(r"KV cache: ([\d.]+) MiB(?: of [\w/]+)? in (\d+) blocks .*; ([\d.]+) sequences of (\d+) tokens at once")


def run_once(orzo, model, prompt, hybrid):
    cmd = ["/usr/bin/time", "-f", "rss %M", orzo, "generate", "-m", model, "-p", prompt, "-n", "32", "--ignore-eos",
           "--temperature", "0", "-t", "1"]
    if not hybrid:
        cmd.append("--no-hybrid-kv")
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    stats, pool = STATS.search(p.stderr), POOL.search(p.stderr)
    rss = re.search(r"rss (\d+)", p.stderr)
    return {"prompt_tokens": int(stats[1]), "prefill_tps": float(stats[2]), "decode_tps": float(stats[3]),
            "kv_mib": float(pool[1]), "kv_blocks": int(pool[2]), "full_contexts": float(pool[3]),
            "context": int(pool[4]), "rss_mib": int(rss[1]) / 1024, "text": p.stdout}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--words", type=int, default=6000)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "kv-layout.json"))
    a = ap.parse_args()
    orzo = os.path.join(a.build, "cli", "orzo")
    model, prompt = gemma_file(), long_prompt(a.words)
    runs = {True: [], False: []}
    for _ in range(a.pairs):
        for hybrid in (True, False):
            runs[hybrid].append(run_once(orzo, model, prompt, hybrid))
    same = len({r["text"] for r in runs[True] + runs[False]}) == 1
    med = {h: {k: statistics.median(r[k] for r in runs[h]) for k in runs[h][0] if k != "text"} for h in runs}
    print(f"CPU: {cpu_model()}; prompt {med[True]['prompt_tokens']:.0f} tokens; same text in every run: {same}")
    print("| layout | KV pool | sequences of 32768 tokens it holds | prefill tok/s | decode tok/s | peak RSS |")
    print("|---|---:|---:|---:|---:|---:|")
    for hybrid, name in ((True, "sliding layers apart (default)"), (False, "one table (`--no-hybrid-kv`)")):
        m = med[hybrid]
        print(f"| {name} | {m['kv_mib']:.0f} MiB, {m['kv_blocks']:.0f} blocks | {m['full_contexts']:.1f} | "
              f"{m['prefill_tps']:.0f} | {m['decode_tps']:.1f} | {m['rss_mib']:.0f} MiB |")
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"cpu": cpu_model(), "model": "gemma-3-270m-q4_k_m", "words": a.words, "same_text": same,
                   "runs": {("hybrid" if h else "flat"): [{k: v for k, v in r.items() if k != "text"} for r in runs[h]]
                            for h in runs}}, f, indent=1)


if __name__ == "__main__":
    main()
