#!/usr/bin/env bash
# Installs the Debian packages orzo builds with (only those missing), then configures and
# builds one CMake preset, all of it or only the targets named.
# Usage: scripts/bootstrap.sh [preset [target...]]   (default: default, every target)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
targets=("${@:2}")

packages=(build-essential cmake ninja-build ccache git curl
  libcaf-dev libboost-dev libboost-system-dev nlohmann-json3-dev libopenblas-dev libpcre2-dev libicu-dev pkg-config
  libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev python3-pip)
# The test build also drives the chat page in a headless browser (tests/serve/test_webui.py).
[ "$preset" = ci ] && packages+=(chromium chromium-driver)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The Python tests' packages (PyPI): the openai client, gguf for the dequantizer reference,
# selenium for the chat page's browser test, lm_eval for the evaluation-harness test,
# jsonschema for the structured-output test.
python3 -c "import openai, gguf, selenium, lm_eval, jsonschema" 2>/dev/null || python3 -m pip install -q -r tests/requirements.txt

cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)" ${targets[@]+--target "${targets[@]}"}
