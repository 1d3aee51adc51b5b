"""`orzo info --json` on every model file in ../shared/models and tests/fixtures, held to the
`gguf` package's reader (GGUF) and to the safetensors headers themselves (HF directories):
the same tensors, the same type mix with the same bytes, the same parameter count. And every
prefix of a damaged file is one clear error line, never a crash."""
import json
import os
import struct
import subprocess
import tempfile
import unittest

import gguf

ORZO = os.environ.get("ORZO", "orzo")
HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("ORZO_SHARED", os.path.join(HERE, "../../../shared"))
ROOTS = [os.path.join(SHARED, "models"), os.path.join(HERE, "../fixtures")]


def model_files():
    ggufs, hf_dirs = [], []
    for root in ROOTS:
        for dirpath, _, names in os.walk(root):
            ggufs += [os.path.join(dirpath, n) for n in names if n.endswith(".gguf")]
            if "config.json" in names and any(n.endswith(".safetensors") for n in names):
                hf_dirs.append(dirpath)
    return sorted(ggufs), sorted(hf_dirs)


def info(path):
    r = subprocess.run([ORZO, "info", "--json", path], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def safetensors_tensors(directory):
    """(dtype, elements, bytes) of every tensor, straight from the files' JSON headers."""
    out = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".safetensors"):
            continue
        with open(os.path.join(directory, name), "rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(size))
        for key, t in header.items():
            if key == "__metadata__":
                continue
            elements = 1
            for d in t["shape"]:
                elements *= d
            out.append((t["dtype"].lower(), elements, t["data_offsets"][1] - t["data_offsets"][0]))
    return out


def type_mix(tensors):
    """{type: {"count", "bytes"}} of (type, bytes) pairs, as `orzo info --json` reports them."""
    mix = {}
    for dtype, size in tensors:
        use = mix.setdefault(dtype, {"count": 0, "bytes": 0})
        use["count"] += 1
        use["bytes"] += size
    return mix


class InfoMatchesTheFiles(unittest.TestCase):
    def test_every_gguf_file(self):
        ggufs, _ = model_files()
        self.assertGreaterEqual(len(ggufs), 8, ggufs)
        for path in ggufs:
            with self.subTest(path=os.path.relpath(path, HERE)):
                rc, out, err = info(path)
                self.assertEqual(rc, 0, err)
                got = json.loads(out)
                reader = gguf.GGUFReader(path)
                self.assertEqual(got["tensors"], len(reader.tensors))
                self.assertEqual(got["parameters"], sum(int(t.n_elements) for t in reader.tensors))
                self.assertEqual(got["tensor_types"],
                                 type_mix((t.tensor_type.name.lower(), int(t.n_bytes)) for t in reader.tensors))
                self.assertEqual(got["architecture"], str(reader.get_field("general.architecture").contents()))

    def test_every_hf_directory(self):
        _, hf_dirs = model_files()
        self.assertGreaterEqual(len(hf_dirs), 5, hf_dirs)
        for directory in hf_dirs:
            with self.subTest(path=os.path.relpath(directory, HERE)):
                rc, out, err = info(directory)
                self.assertEqual(rc, 0, err)
                got = json.loads(out)
                tensors = safetensors_tensors(directory)
                self.assertEqual(got["tensors"], len(tensors))
                self.assertEqual(got["parameters"], sum(e for _, e, _ in tensors))
                self.assertEqual(got["tensor_types"], type_mix((dtype, size) for dtype, _, size in tensors))
                with open(os.path.join(directory, "config.json")) as f:
                    self.assertEqual(got["architecture"], json.load(f)["architectures"][0])

    def test_a_damaged_file_is_one_error_line(self):
        ggufs, _ = model_files()
        source = min(ggufs, key=os.path.getsize)
        with open(source, "rb") as f:
            data = f.read()
        with tempfile.TemporaryDirectory() as tmp:
            damaged = os.path.join(tmp, "damaged.gguf")
            for size in sorted({0, 3, 4, 8, 16, 24, 100, 1000, len(data) // 2, len(data) - 1}):
                with self.subTest(bytes=size):
                    with open(damaged, "wb") as f:
                        f.write(data[:size])
                    rc, out, err = info(damaged)
                    self.assertEqual(rc, 1, out + err)
                    self.assertEqual(out, "")
                    lines = err.strip().splitlines()
                    self.assertEqual(len(lines), 1, err)
                    self.assertTrue(lines[0].startswith("orzo: error: "), err)


if __name__ == "__main__":
    unittest.main()
