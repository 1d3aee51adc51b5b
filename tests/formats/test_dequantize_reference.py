"""orzo's reference dequantizer (kernels/cpu/dequantize.cpp) against the `gguf` package's
(gguf.quants, PyPI), bit for bit: random blocks of every block type, with extreme, tiny,
negative and zero scales, all-zero and all-ones blocks, and every tensor of the real files.

DEQUANTIZE_GGUF names tests/support/dequantize_gguf, which decodes every tensor of a GGUF
file to f32 with orzo's code; ORZO_SHARED is ../shared. The Gemma 3 file is used when
`../shared/models/fetch.sh gemma-3-270m-q4_k_m` has put it in the cache (ORZO_MODEL_CACHE
or ~/.cache/orzo-models), and skipped, saying so, when it has not."""
import os
import subprocess
import tempfile
import unittest
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize

TOOL = os.environ["DEQUANTIZE_GGUF"]
SHARED = Path(os.environ["ORZO_SHARED"])
CACHE = Path(os.environ.get("ORZO_MODEL_CACHE", Path.home() / ".cache" / "orzo-models"))

# Byte offsets of each type's f16 scale fields (d, and m or dmin), per core/quant_blocks.hpp.
SCALE_FIELDS = {
    Q.Q8_0: [0], Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.IQ4_NL: [0],
    Q.Q2_K: [80, 82], Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208], Q.IQ4_XS: [0],
}
# The largest and smallest normal and subnormal f16 magnitudes, both signs, zero, and ordinary values.
SCALES = np.array([65504.0, -65504.0, 6.1035e-05, -6.1035e-05, 5.96e-08, -5.96e-08, 0.0, -0.0,
                   1.0, -1.0, 0.0123, -3.5, 1000.0], dtype=np.float16)


def dequantize_with_orzo(path, out_dir):
    out = Path(out_dir) / "f32.gguf"
    subprocess.run([TOOL, str(path), str(out)], check=True)
    return {t.name: np.array(t.data) for t in gguf.GGUFReader(out).tensors}


def assert_same_bits(test, name, want, got):
    want = np.ascontiguousarray(want, dtype=np.float32).reshape(-1)
    got = np.ascontiguousarray(got, dtype=np.float32).reshape(-1)
    test.assertEqual(want.shape, got.shape, name)
    differ = np.flatnonzero(want.view(np.uint32) != got.view(np.uint32))
    if differ.size:
        i = differ[0]
        test.fail(f"{name}: {differ.size} of {want.size} values differ; first at {i}: "
                  f"gguf {want[i]!r} orzo {got[i]!r}")


def random_blocks(qtype, count, rng):
    block_elems, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, size=(count, block_bytes), dtype=np.uint8)
    blocks[0] = 0          # a zero block
    blocks[1] = 0xff       # every code at its top, and NaN-free scales set below
    for field in SCALE_FIELDS[qtype]:
        scales = SCALES[rng.integers(0, SCALES.size, size=count)]
        blocks[:, field:field + 2] = scales.view(np.uint8).reshape(count, 2)
    blocks[0, SCALE_FIELDS[qtype]] = 0
    return blocks, block_elems


class RandomBlocks(unittest.TestCase):
    def test_every_type(self):
        rng = np.random.default_rng(16)
        rows, blocks_per_row = 64, 4
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "blocks.gguf"
            writer = gguf.GGUFWriter(str(path), arch="llama")
            want = {}
            for qtype in SCALE_FIELDS:
                blocks, _ = random_blocks(qtype, rows * blocks_per_row, rng)
                raw = blocks.reshape(rows, -1)
                writer.add_tensor(qtype.name, raw, raw_dtype=qtype)
                want[qtype.name] = dequantize(raw, qtype)
            writer.write_header_to_file()
            writer.write_kv_data_to_file()
            writer.write_tensors_to_file()
            writer.close()
            got = dequantize_with_orzo(path, tmp)
        for name, values in want.items():
            with self.subTest(type=name):
                assert_same_bits(self, name, values, got[name])


def check_real_file(test, path):
    reader = gguf.GGUFReader(path)
    with tempfile.TemporaryDirectory() as tmp:
        got = dequantize_with_orzo(path, tmp)
        types = set()
        for t in reader.tensors:
            types.add(t.tensor_type.name)
            with test.subTest(tensor=t.name):
                assert_same_bits(test, t.name, dequantize(np.array(t.data), t.tensor_type), got[t.name])
    print(f"{Path(path).name}: {len(reader.tensors)} tensors bit-exact, types {sorted(types)}")


class RealFiles(unittest.TestCase):
    def test_smollm2_q4_1(self):
        check_real_file(self, SHARED / "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf")

    def test_gemma3_q4_k_m(self):
        path = CACHE / "gemma-3-270m-q4_k_m/gemma-3-270m-q4_k_m.gguf"
        if not path.exists():
            self.skipTest(f"{path} absent: run ../shared/models/fetch.sh gemma-3-270m-q4_k_m")
        check_real_file(self, path)


if __name__ == "__main__":
    unittest.main()
