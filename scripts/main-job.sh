#!/usr/bin/env bash
# The main job on a fresh machine: set up, build, make a random-weight model shaped like
# the benchmark's small Llama, and run the offline benchmark on it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh default
model=models/small-f16.gguf
mkdir -p models
[ -f "$model" ] || build/tools/orzo-make-model --shape small --dtype f16 --format gguf --out "$model"
build/cli/orzo bench -m "$model" --batch 4 --prompt 128 --gen 32
