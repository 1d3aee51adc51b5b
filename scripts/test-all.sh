#!/usr/bin/env bash
# Set up, build with CUDA on and warnings as errors (the ci preset, into build/), and run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh ci
# The Llama 3 tokenizer.json the LlamaCppLlamaBpe conformance tests read (they skip without it).
../shared/models/fetch.sh llama3-tokenizer >/dev/null ||
  echo "test-all: no Llama 3 tokenizer; TokenizerConformance.LlamaCppLlamaBpe* will skip" >&2
ctest --preset ci -j "$(nproc)"
