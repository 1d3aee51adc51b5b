#!/usr/bin/env bash
# llama.cpp as an optional benchmark peer for bench/side_by_side.py. orzo never needs it and
# nothing of it is committed: its sources come by package name from PyPI (the sdist of
# llama-cpp-python vendors the whole llama.cpp tree at vendor/llama.cpp, with the git data of
# the commit it pins), and it builds outside the repository.
#
#   bench/peer/build_llamacpp.sh [--isa native|avx512|avx2] [--out DIR] [--jobs N] [--fetch-only]
#
# --isa native (default): GGML_NATIVE=ON, -march=native, the way llama.cpp builds by default.
# --isa avx512: GGML_NATIVE=OFF with AVX2 and AVX-512 (F, BW, VL, DQ, CD, VBMI, VNNI, BF16) on and
#   AMX off: the peer of orzo's avx512-bf16 level on a CPU whose AMX a native build cannot use
#   (on this project's Emerald Rapids VM, llama.cpp's AMX kernel dies of SIGILL on its first
#   tileloadd).
# --isa avx2: GGML_NATIVE=OFF with AVX, AVX2, FMA, F16C and BMI2 on and every AVX-512
#   extension (and AVX-VNNI, AMX) off: the peer of orzo's AVX2 level (`orzo bench --cpu-isa
#   avx2`), which an AVX-512 machine otherwise cannot show.
# --out DIR: where to configure and build (default ~/.cache/orzo-peer/<isa>; the sdist and its
#   unpacked tree stay in ~/.cache/orzo-peer, or $ORZO_PEER_CACHE, shared by every build).
# --fetch-only: fetch, check and unpack the sources, print where they are, build nothing.
#
# Builds only llama-bench and llama-batched-bench: Release, CPU backend only, static
# libraries, no network library. Writes orzo-peer.json beside them (sdist, sha256, commit, isa,
# CMake flags) for the harness to record, and prints their directory (the --peer argument) as
# its only line on stdout. On a shared 2-core machine run it under `nice -n 19`.
set -euo pipefail

VERSION=0.3.36
# llama_cpp_python-0.3.36.tar.gz as PyPI serves it (pip download, 2026-12-01). A file that
# differs is not the tree these scripts were checked against.
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e

isa=native
out=
jobs=$(nproc)
fetch_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --isa) isa=${2:?--isa needs native, avx512 or avx2}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --jobs) jobs=${2:?--jobs needs a number}; shift 2 ;;
    --fetch-only) fetch_only=1; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "build_llamacpp.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

case "$isa" in
  native) isa_flags=(-DGGML_NATIVE=ON) ;;
  avx512) isa_flags=(-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
                     -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON
                     -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF
                     -DGGML_AMX_BF16=OFF) ;;
  avx2) isa_flags=(-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
                   -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF
                   -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF
                   -DGGML_AMX_BF16=OFF) ;;
  *) echo "build_llamacpp.sh: --isa is native, avx512 or avx2, not $isa" >&2; exit 2 ;;
esac

cache=${ORZO_PEER_CACHE:-$HOME/.cache/orzo-peer}
mkdir -p "$cache"

sdist=$cache/llama_cpp_python-$VERSION.tar.gz
if [ ! -f "$sdist" ]; then
  echo "fetching llama-cpp-python==$VERSION (sdist) from PyPI into $cache" >&2
  python3 -m pip download --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$cache" >&2
fi
got=$(sha256sum "$sdist" | cut -d' ' -f1)
if [ "$got" != "$SHA256" ]; then
  echo "build_llamacpp.sh: $sdist has sha256 $got, expected $SHA256; remove it to fetch it again" >&2
  exit 1
fi
echo "sdist $sdist, sha256 $got" >&2

# Unpacked once into a scratch folder and renamed, so an interrupted unpack leaves no half tree
# that a later run would take for a whole one.
tree=$cache/llama_cpp_python-$VERSION
src=$tree/vendor/llama.cpp
if [ ! -f "$src/CMakeLists.txt" ]; then
  if [ -e "$tree" ]; then
    echo "build_llamacpp.sh: $tree exists but has no vendor/llama.cpp; remove it to unpack again" >&2
    exit 1
  fi
  scratch=$(mktemp -d "$cache/unpack.XXXXXX")
  tar -xzf "$sdist" -C "$scratch"
  mv "$scratch/llama_cpp_python-$VERSION" "$tree"
  rmdir "$scratch"
  echo "$got" > "$tree/.orzo-peer-sha256"
fi
commit=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)
echo "llama.cpp $commit at $src" >&2
if [ "$fetch_only" = 1 ]; then echo "$src"; exit 0; fi

out=${out:-$cache/$isa}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# CPU only (every GPU backend and BLAS are off by default and stay off); static libraries, so
# the two binaries carry their own copy of ggml. This tree has no libcurl dependency any more
# (LLAMA_CURL is deprecated and ignored); LLAMA_OPENSSL=OFF keeps TLS out as well: the peer
# only reads local files.
generator=()
if command -v ninja > /dev/null && [ ! -f "$out/build/CMakeCache.txt" ]; then generator=(-G Ninja); fi
cmake_flags=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_CPU=ON -DGGML_BLAS=OFF -DGGML_CUDA=OFF
             -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF
             -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF
             -DLLAMA_BUILD_TOOLS=ON "${isa_flags[@]}")
cmake -S "$src" -B "$out/build" "${generator[@]}" "${cmake_flags[@]}" >&2
cmake --build "$out/build" -j "$jobs" --target llama-bench llama-batched-bench >&2

bin=$out/build/bin
for b in llama-bench llama-batched-bench; do
  if [ ! -x "$bin/$b" ]; then echo "build_llamacpp.sh: no $bin/$b after the build" >&2; exit 1; fi
done
ORZO_PEER_INFO="$bin/orzo-peer.json" python3 - "$isa" "$VERSION" "$sdist" "$got" "$commit" "$src" \
    "$(c++ --version | head -n 1)" "${cmake_flags[@]}" <<'EOF'
import json, os, sys, time
isa, version, sdist, sha, commit, src, compiler, *flags = sys.argv[1:]
info = {"isa": isa, "package": f"llama-cpp-python=={version}", "sdist": os.path.basename(sdist),
        "sdist_sha256": sha, "llama_cpp_commit": commit, "source": src, "compiler": compiler,
        "cmake_flags": flags, "built": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
with open(os.environ["ORZO_PEER_INFO"], "w") as f:
    json.dump(info, f, indent=1)
EOF
echo "$bin"
