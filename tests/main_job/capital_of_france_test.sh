#!/usr/bin/env bash
# ctest main_job.capital_of_france: the main job's question (scripts/capital-of-france.sh) put to
# SmolLM2-135M-Instruct gets, greedy, "The capital of France is Paris." and nothing more. The
# model is $ORZO_SMOLLM2 when set, else models/ at the repository root (scripts/fetch-smollm2.sh),
# else the shared test data's copy; with none of them the test is skipped (exit 77), saying so.
# Usage: capital_of_france_test.sh ORZO SHARED_DIR
set -euo pipefail
if (($# != 2)); then
  echo "usage: $0 ORZO SHARED_DIR" >&2
  exit 2
fi
orzo="$1"
src="$(cd "$(dirname "$0")/../.." && pwd)"
name=SmolLM2-135M-Instruct.Q4_1.gguf
if [ -n "${ORZO_SMOLLM2:-}" ]; then
  [ -f "$ORZO_SMOLLM2" ] || { echo "ORZO_SMOLLM2=$ORZO_SMOLLM2: no such file" >&2; exit 1; }
  model="$ORZO_SMOLLM2"
else
  model=""
  for candidate in "$src/models/$name" "$2/models/smollm2-135m-instruct/$name"; do
    if [ -f "$candidate" ]; then
      model="$candidate"
      break
    fi
  done
  if [ -z "$model" ]; then
    echo "skipped: no $name in $src/models (scripts/fetch-smollm2.sh puts it there) or $2/models/smollm2-135m-instruct, and ORZO_SMOLLM2 is not set"
    exit 77
  fi
fi
expected="The capital of France is Paris."
err="$(mktemp)"
trap 'rm -f "$err"' EXIT
status=0
answer="$("$src/scripts/capital-of-france.sh" "$orzo" "$model" 2>"$err")" || status=$?
if ((status != 0)) || [ "$answer" != "$expected" ]; then
  echo "$model: expected \"$expected\", got \"$answer\" (exit $status); stderr:" >&2
  cat "$err" >&2
  exit 1
fi
echo "$model: $answer"
