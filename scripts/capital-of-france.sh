#!/usr/bin/env bash
# The question the main job asks a chat model: greedy, through the model's chat template, with a
# plain system message. The question goes to stderr and the answer to stdout, which the ctest
# main_job.capital_of_france holds to "The capital of France is Paris." on SmolLM2-135M-Instruct.
# Usage: scripts/capital-of-france.sh ORZO MODEL
set -euo pipefail
if (($# != 2)); then
  echo "usage: $0 ORZO MODEL" >&2
  exit 2
fi
question="What is the capital of France?"
echo "> $question" >&2
exec "$1" chat -m "$2" --system "You are a helpful assistant." --temperature 0 -p "$question"
