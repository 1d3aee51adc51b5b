#!/usr/bin/env python3
"""Tokenizer encode speed, orzo beside HF `tokenizers`, in one run.

    python3 bench/tokenizer_bench.py [--build build] [--out bench/results/tokenizer.json]

Both sides encode every text of tests/fixtures/tokenizer/corpus.jsonl one at a time
(add_special_tokens=False) on one thread: HF with RAYON_NUM_THREADS=1 and a loop of
`encode` (no encode_batch), orzo through bench/tokenizer_bench (Google Benchmark). Each
side reports its best of several passes after a warm-up pass (both keep a BPE cache), in
MB/s of UTF-8 input. The HF tokenizers are the references of tools/make_tokenizer_expected.py,
so both sides produce the same ids.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import make_tokenizer_expected as refs  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402


def families(shared):
    m = shared / "models"
    # name: (orzo model path, HF reference)
    return {
        "qwen3": (m / "tokenizers/qwen3", lambda: Tokenizer.from_file(str(m / "tokenizers/qwen3/tokenizer.json"))),
        "phi-3": (m / "tokenizers/phi-3", lambda: Tokenizer.from_file(str(m / "tokenizers/phi-3/tokenizer.json"))),
        "gpt2": (m / "tokenizers/gpt2", lambda: refs.gpt2(shared)),
        "mistral-v1": (m / "tokenizers/mistral-v1/tokenizer.model", lambda: refs.mistral(shared)),
        "stories260K": (m / "stories260K/hf", lambda: Tokenizer.from_file(str(m / "stories260K/hf/tokenizer.json"))),
    }


def hf_mb_per_s(tok, texts, passes):
    nbytes = sum(len(t.encode()) for t in texts)
    for t in texts:
        tok.encode(t, add_special_tokens=False)
    best = float("inf")
    for _ in range(passes):
        start = time.perf_counter()
        for t in texts:
            tok.encode(t, add_special_tokens=False)
        best = min(best, time.perf_counter() - start)
    return nbytes / best / 1e6


def orzo_mb_per_s(build, corpus, fams, repetitions):
    cmd = [str(Path(build) / "bench/tokenizer_bench"), f"--corpus={corpus}"]
    cmd += [f"{name}={path}" for name, (path, _) in fams.items()]
    cmd += ["--benchmark_format=json", f"--benchmark_repetitions={repetitions}"]
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    best = {}
    for b in out["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        name = b["run_name"].split("/")[1]
        best[name] = max(best.get(name, 0.0), b["bytes_per_second"] / 1e6)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--shared", default=str(ROOT.parent / "shared"))
    ap.add_argument("--out", default=str(ROOT / "bench/results/tokenizer.json"))
    ap.add_argument("--passes", type=int, default=5)
    args = ap.parse_args()
    corpus = ROOT / "tests/fixtures/tokenizer/corpus.jsonl"
    texts = [json.loads(line) for line in corpus.read_text(encoding="utf-8").split("\n") if line]
    fams = families(Path(args.shared))
    ours = orzo_mb_per_s(args.build, corpus, fams, args.passes)
    rows = []
    for name, (_, make) in fams.items():
        hf = hf_mb_per_s(make(), texts, args.passes)
        rows.append({"family": name, "orzo_mb_per_s": round(ours[name], 2), "hf_tokenizers_mb_per_s": round(hf, 2),
                     "ratio": round(ours[name] / hf, 2)})
    result = {
        "what": "encode MB/s of UTF-8 input, one text at a time, one thread, best of passes after a warm-up",
        "corpus": {"path": str(corpus.relative_to(ROOT)), "texts": len(texts),
                   "bytes": sum(len(t.encode()) for t in texts)},
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
        "hf_tokenizers_version": __import__("tokenizers").__version__,
        "results": rows,
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print("| family | orzo MB/s | HF tokenizers MB/s | ratio |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['family']} | {r['orzo_mb_per_s']} | {r['hf_tokenizers_mb_per_s']} | {r['ratio']}x |")


if __name__ == "__main__":
    main()
