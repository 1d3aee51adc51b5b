#!/usr/bin/env python3
"""What structured outputs cost a serving batch: 16 concurrent streams on `orzo serve`, each
generating 128 tokens (ignore_eos) at temperature 1, without a constraint, with a regular
expression (`[a-z ]*`, a large allowed set at every token), and with a 10-property JSON
schema; alternating, --pairs rounds, medians of the aggregate decode throughput.

    python3 bench/run_structured.py [--build build] [--model M] [--pairs 3]
"""
import argparse
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from machine import cpu_model  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "serve"))
import harness  # noqa: E402

SMOLLM2 = os.path.join(os.path.dirname(ROOT), "shared", "models", "smollm2-135m-instruct",
                       "SmolLM2-135M-Instruct.Q4_1.gguf")
SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 24}, "age": {"type": "integer", "minimum": 0, "maximum": 130},
    "email": {"type": "string", "format": "email"}, "active": {"type": "boolean"}, "score": {"type": "number"},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 4},
    "city": {"type": "string", "maxLength": 20}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
    "kind": {"enum": ["user", "admin", "guest"]}, "note": {"type": ["string", "null"], "maxLength": 40}},
    "required": ["name", "age", "email", "active", "score", "tags", "city", "zip", "kind", "note"],
    "additionalProperties": False}
MODES = {
    "none": {},
    "regex": {"guided_regex": "[a-z ]*"},
    "json_schema": {"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}},
}
STREAMS, TOKENS = 16, 128


def round_of(server, extra, seed):
    def one(i):
        status, _, out = server.post("/v1/completions", {"prompt": "Describe a person.", "max_tokens": TOKENS,
                                                          "ignore_eos": True, "temperature": 1, "seed": seed + i, **extra},
                                     timeout=600)
        assert status == 200, out
        return out["usage"]["completion_tokens"]

    start = time.perf_counter()
    with ThreadPoolExecutor(STREAMS) as pool:
        tokens = sum(pool.map(one, range(STREAMS)))
    return tokens / (time.perf_counter() - start)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model", default=SMOLLM2)
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args()
    harness.ORZO = os.path.join(args.build, "cli", "orzo")
    server = harness.Server("--max-num-seqs", str(STREAMS), model=args.model)
    try:
        for extra in MODES.values():  # warm: constraints compiled, their masks built
            round_of(server, extra, 1000)
        rates = {m: [] for m in MODES}
        for p in range(args.pairs):
            for mode, extra in MODES.items():
                rates[mode].append(round_of(server, extra, 100 * p))
    finally:
        server.stop()
    base = statistics.median(rates["none"])
    print(f"CPU {cpu_model()}; {os.path.basename(args.model)}; {STREAMS} streams x {TOKENS} tokens, temperature 1")
    for mode, r in rates.items():
        m = statistics.median(r)
        print(f"{mode:12s} {m:7.1f} tokens/s  ({m / base:.3f} of unconstrained; runs {', '.join(f'{x:.1f}' for x in r)})")
    print(json.dumps({m: statistics.median(r) for m, r in rates.items()}))


if __name__ == "__main__":
    main()
