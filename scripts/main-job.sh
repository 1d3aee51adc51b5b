#!/usr/bin/env bash
# The main job on a fresh machine: set up, build, and run `orzo generate` on the built-in
# default model (random weights written at build time: it needs no download).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh default
build/cli/orzo generate -p "Once upon a time" -n 32
