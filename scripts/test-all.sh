#!/usr/bin/env bash
# Set up, build with CUDA on and warnings as errors, and run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh ci
ctest --preset ci -j "$(nproc)"
