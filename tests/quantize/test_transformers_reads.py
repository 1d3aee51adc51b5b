"""Files written by `orzo quantize`, read by transformers' GGUF loader (which dequantizes them
with the gguf package and undoes llama.cpp's q/k row order): stories260K's HF checkpoint,
quantized to llama.cpp's Q8_0 and Q4_K_M mixes, and a random model 256 wide (so that the
K-quants and IQ4_XS fit its rows, which stories260K's 64 do not) in every block type, must
give the same next-token log-probabilities in transformers as in orzo on the same file.

Needs torch and transformers (tools/requirements.txt); exits 77, which ctest reports as a
skip, without them."""
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

try:
    import torch
    import transformers
except ImportError as e:
    print(f"skipped: {e} (pip install -r tools/requirements.txt)")
    sys.exit(77)

HF = Path(os.environ["ORZO_SHARED"]) / "models/stories260K/hf"
STORY = ("Once upon a time, there was a little girl named Lily. She loved to play in the park with her "
         "big red ball. One day, she saw a small dog under a tree. The dog was sad because it was lost. "
         "Lily gave the dog some of her bread and they became good friends. They played together until "
         "the sun went down, and then Lily helped the dog find its home.")


class TransformersReadsOrzoQuantize(unittest.TestCase):
    def check(self, target, source=HF):
        with tempfile.TemporaryDirectory() as tmp:
            if source is None:  # the random model, written by orzo-make-model
                source = Path(tmp) / "random-f32.gguf"
                subprocess.run([os.environ["ORZO_MAKE_MODEL"], "--shape", "tiny", "--dim", "256", "--hidden", "512",
                                "--heads", "4", "--kv-heads", "2", "--layers", "2", "--vocab", "512", "--dtype", "f32",
                                "--format", "gguf", "--out", str(source)], check=True, capture_output=True)
            out = Path(tmp) / f"model-{target}.gguf"
            subprocess.run([os.environ["ORZO"], "quantize", str(source), str(out), target], check=True,
                           capture_output=True)
            text = Path(tmp) / "story.txt"
            text.write_text(STORY)
            orzo = json.loads(subprocess.run([os.environ["SCORE_TOKENS"], str(out), str(text)], check=True,
                                             capture_output=True, text=True).stdout)
            model = transformers.AutoModelForCausalLM.from_pretrained(tmp, gguf_file=out.name, dtype=torch.float32)
        ids = orzo["ids"]
        with torch.no_grad():
            logp = torch.log_softmax(model.eval()(torch.tensor([ids])).logits[0].double(), dim=-1)
        ref = logp[:-1].gather(1, torch.tensor(ids[1:])[:, None])[:, 0].tolist()
        worst = max(abs(a - b) for a, b in zip(orzo["logprobs"], ref))
        agree = sum(int(a == b) for a, b in zip(orzo["top1"], logp[:-1].argmax(dim=-1).tolist())) / len(ref)
        # How far below transformers' best token orzo's best one is, by transformers' own
        # log-probabilities: 0 where they agree, a near-tie where they do not.
        tie = max((logp[i].max() - logp[i][t]).item() for i, t in enumerate(orzo["top1"]))
        ppl = math.exp(-sum(orzo["logprobs"]) / len(ref)), math.exp(-sum(ref) / len(ref))
        print(f"{out.name}: {len(ids)} tokens, perplexity orzo {ppl[0]:.4f} transformers {ppl[1]:.4f}, "
              f"top-1 agreement {agree:.4f}, largest log-probability difference {worst:.2e}, "
              f"top-1 choices at most {tie:.2e} apart")
        # The same dequantized weights on both sides, in f32 or (on AVX-512, the block types)
        # against activations rounded to 2^-16 of each block's largest: the log-probabilities
        # differ by rounding only, so the top-1 tokens may differ only where transformers'
        # two leaders are that close (the random model's logits are nearly flat: a few such
        # ties in 486 positions).
        self.assertLess(worst, 1e-3)
        self.assertLessEqual(tie, 2 * worst)

    def test_q8_0_mix(self):
        self.check("Q8_0")

    def test_q4_k_m_mix(self):
        self.check("Q4_K_M")

    def test_every_block_type_on_rows_of_256(self):
        for target in ["q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_nl",
                       "iq4_xs", "Q4_K_M"]:
            with self.subTest(target=target):
                self.check(target, source=None)


if __name__ == "__main__":
    unittest.main()
