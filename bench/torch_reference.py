#!/usr/bin/env python3
"""PyTorch and transformers on the weights gpu_bench ran, on the same GPU, in the same device
check (scripts/device-check.sh): the last-position logits of the same prompt (ids 1..32) set
against orzo's, and greedy decode speed through transformers' generate at the same prompt and
output lengths. Writes one JSON object."""
import argparse
import json
import time

import numpy as np
import torch
from transformers import AutoModelForCausalLM


def compare_logits(model, orzo_path):
    ids = torch.arange(1, 33, device="cuda")[None]
    with torch.no_grad():
        want = model(ids).logits[0, -1].float().cpu().numpy()
    got = np.fromfile(orzo_path, dtype=np.float32)
    if got.shape != want.shape:
        return {"error": f"orzo wrote {got.shape[0]} logits, transformers gives {want.shape[0]}"}
    top_want, top_got = np.argsort(-want)[:10], np.argsort(-got)[:10]
    return {
        "max_abs_diff": float(np.max(np.abs(got - want))),
        "max_abs_logit": float(np.max(np.abs(want))),
        "argmax_equal": bool(top_want[0] == top_got[0]),
        "top10_overlap": len(set(top_want.tolist()) & set(top_got.tolist())),
    }


def timed_generate(model, batch, prompt, gen):
    ids = torch.randint(1, model.config.vocab_size, (batch, prompt), device="cuda")
    mask = torch.ones_like(ids)

    def once(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.no_grad():
            model.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=n, min_new_tokens=n,
                           pad_token_id=0)
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    once(2)  # warm-up
    first = once(1)
    full = once(gen)
    return {"batch": batch, "ttft_ms": first * 1e3, "decode_tps": batch * (gen - 1) / (full - first)}


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("model")
    p.add_argument("--orzo-logits", required=True)
    p.add_argument("--json", required=True)
    p.add_argument("--prompt", type=int, default=128)
    p.add_argument("--gen", type=int, default=128)
    p.add_argument("--batches", default="1,64")
    a = p.parse_args()
    out = {"torch": torch.__version__}
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.bfloat16).cuda().eval()
    out["logits"] = compare_logits(model, a.orzo_logits)
    out["runs"] = [timed_generate(model, int(b), a.prompt, a.gen) for b in a.batches.split(",")]
    with open(a.json, "w") as f:
        json.dump(out, f, indent=2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
