"""Where the benchmark scripts find their models: stories260K in ../shared, and the
random-weight `small` shape (F16 GGUF), written by orzo-make-model on first use."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STORIES = os.path.join(os.path.dirname(ROOT), "shared", "models", "stories260K", "stories260K.gguf")


def small_f16(build):
    path = os.path.join(ROOT, "models", "small-f16.gguf")
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        subprocess.run([f"{build}/tools/orzo-make-model", "--shape", "small", "--dtype", "f16", "--format", "gguf",
                        "--out", path], check=True)
    return path
