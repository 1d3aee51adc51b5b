"""Files written by `orzo quantize`, read by the `gguf` Python package (llama.cpp's gguf-py).

Each plain type must load in GGUFReader and dequantize (gguf.quants) to within the stated
relative RMS error of the input weights; the types gguf.quants can also encode (Q8_0, Q4_0,
Q4_1, Q5_0, Q5_1, F16, BF16) must match its bytes exactly. The mixes must follow llama.cpp's
per-tensor recipe, every input key must be carried over, and an HF directory must give the
same tensors as the GGUF of the same weights (q/k rows permuted as llama.cpp's converter does).
"""
import os
import subprocess
import tempfile
import unittest

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader
from gguf.quants import dequantize, quantize

ORZO = os.environ["ORZO"]
MAKE_MODEL = os.environ["ORZO_MAKE_MODEL"]
SHAPE = ["--shape", "tiny", "--dim", "256", "--hidden", "512", "--heads", "4", "--kv-heads", "2", "--layers", "8", "--vocab", "512"]

# Relative RMS error bounds of one round trip on these bell-shaped random weights: a little
# above what the quantizers measure (tests/kernels/quantize_test.cpp states the Gaussian ones).
BOUNDS = {
    "f32": 0.0, "f16": 5e-4, "bf16": 4e-3, "q8_0": 0.006, "q4_0": 0.09, "q4_1": 0.08, "q5_0": 0.045,
    "q5_1": 0.04, "q2_k": 0.31, "q3_k": 0.16, "q4_k": 0.075, "q5_k": 0.038, "q6_k": 0.019,
    "iq4_nl": 0.08, "iq4_xs": 0.08,
}
GGUF_TYPE = {
    "f32": Q.F32, "f16": Q.F16, "bf16": Q.BF16, "q8_0": Q.Q8_0, "q4_0": Q.Q4_0, "q4_1": Q.Q4_1, "q5_0": Q.Q5_0,
    "q5_1": Q.Q5_1, "q2_k": Q.Q2_K, "q3_k": Q.Q3_K, "q4_k": Q.Q4_K, "q5_k": Q.Q5_K, "q6_k": Q.Q6_K,
    "iq4_nl": Q.IQ4_NL, "iq4_xs": Q.IQ4_XS,
}
REFERENCE_ENCODED = {"f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1"}


def run(*args):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"{args} failed ({r.returncode}): {r.stderr}")
    return r


def f32_tensors(reader):
    return {t.name: np.array(t.data, dtype=np.float32).reshape([int(d) for d in reversed(t.shape)]) for t in reader.tensors}


def field(reader, key):
    f = reader.fields[key]
    if f.types[0].name == "STRING":
        return bytes(f.parts[-1]).decode()
    if f.types[0].name == "ARRAY":
        return [bytes(f.parts[i]).decode() if f.types[-1].name == "STRING" else f.parts[i].tolist() for i in f.data]
    return f.parts[-1].tolist()[0]


class QuantizedFilesInGguf(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        cls.f32 = os.path.join(cls.dir, "f32.gguf")
        cls.hf = os.path.join(cls.dir, "hf")
        run(MAKE_MODEL, *SHAPE, "--dtype", "f32", "--format", "gguf", "--seed", "3", "--out", cls.f32)
        run(MAKE_MODEL, *SHAPE, "--dtype", "f32", "--format", "safetensors", "--seed", "3", "--out", cls.hf)
        cls.input = GGUFReader(cls.f32)
        cls.weights = f32_tensors(cls.input)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def quantize(self, src, target):
        out = os.path.join(self.dir, f"{os.path.basename(src)}-{target}.gguf")
        run(ORZO, "quantize", src, out, target)
        return GGUFReader(out)

    def test_every_plain_type_dequantizes_within_its_bound(self):
        for target, bound in BOUNDS.items():
            with self.subTest(target=target):
                r = self.quantize(self.f32, target)
                self.assertEqual(field(r, "general.quantization_version"), 2)
                for t in r.tensors:
                    x = self.weights[t.name]
                    want = Q.F32 if x.ndim == 1 else GGUF_TYPE[target]
                    self.assertEqual(t.tensor_type, want, t.name)
                    y = dequantize(t.data, t.tensor_type).reshape(x.shape)
                    err = float(np.sqrt(((x - y) ** 2).sum() / (x ** 2).sum()))
                    self.assertLessEqual(err, bound, f"{t.name}: relative RMS error {err:.4g}")
                    if x.ndim == 2 and target in REFERENCE_ENCODED:
                        self.assertEqual(bytes(t.data), bytes(quantize(x, t.tensor_type)), f"{t.name} bytes")

    def test_every_input_key_is_carried_over(self):
        r = self.quantize(self.f32, "q4_k")
        for key in self.input.fields:
            if key.startswith("GGUF.") or key in ("general.file_type", "general.quantization_version"):
                continue
            self.assertIn(key, r.fields)
            self.assertEqual(field(r, key), field(self.input, key), key)
        self.assertEqual(field(r, "general.file_type"), 14)  # LLAMA_FTYPE_MOSTLY_Q4_K_S

    # llama.cpp's use_more_bits over 8 layers: the first and last and every third between.
    def test_q4_k_m_follows_llama_cpp(self):
        r = self.quantize(self.f32, "Q4_K_M")
        self.assertEqual(field(r, "general.file_type"), 15)
        types = {t.name: t.tensor_type for t in r.tensors}
        more_bits = {0, 3, 6, 7}  # i < 8/8, i >= 7*8/8, (i - 8/8) % 3 == 2
        for layer in range(8):
            for part in ("attn_v", "ffn_down"):
                want = Q.Q6_K if layer in more_bits else Q.Q4_K
                self.assertEqual(types[f"blk.{layer}.{part}.weight"], want, f"{part} {layer}")
            self.assertEqual(types[f"blk.{layer}.attn_q.weight"], Q.Q4_K)
            self.assertEqual(types[f"blk.{layer}.attn_norm.weight"], Q.F32)
        self.assertEqual(types["output.weight"], Q.Q6_K)
        self.assertEqual(types["token_embd.weight"], Q.Q4_K)

    def test_q3_k_m_follows_llama_cpp(self):
        types = {t.name: t.tensor_type for t in self.quantize(self.f32, "Q3_K_M").tensors}
        for layer in range(8):
            self.assertEqual(types[f"blk.{layer}.attn_v.weight"], Q.Q5_K if layer < 2 else Q.Q4_K)
            self.assertEqual(types[f"blk.{layer}.ffn_down.weight"], Q.Q4_K)  # layer < 8 / 16 is none
            self.assertEqual(types[f"blk.{layer}.attn_output.weight"], Q.Q4_K)
            self.assertEqual(types[f"blk.{layer}.ffn_up.weight"], Q.Q3_K)

    def test_hf_directory_gives_the_gguf_tensors(self):
        from_gguf = {t.name: bytes(t.data) for t in self.quantize(self.f32, "q8_0").tensors}
        hf = self.quantize(self.hf, "q8_0")
        self.assertEqual({t.name: bytes(t.data) for t in hf.tensors}, from_gguf)
        self.assertEqual(field(hf, "general.architecture"), "llama")
        self.assertEqual(field(hf, "llama.embedding_length"), 256)
        self.assertEqual(field(hf, "llama.rope.freq_base"), 500000.0)


if __name__ == "__main__":
    unittest.main()
