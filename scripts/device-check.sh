#!/usr/bin/env bash
# The one prepared script for a lent GPU machine (an H200 through the device tool). That
# machine has CUDA, PyTorch and transformers but no package registry and none of the Debian
# libraries orzo links (CAF, OpenBLAS, ICU, PCRE2), and ../shared does not travel there. So
# the build is made here and travels with those libraries and the test data:
#
#   scripts/device-check.sh pack         (here) build for sm_90 into build-device/ and pack the
#                                        binaries, the libraries they need that the GPU image
#                                        lacks, and stories260K into .device/ (git-ignored)
#   scripts/device-check.sh run OUTDIR   (there) GPU tests, compute-sanitizer, the GPU bench and
#                                        PyTorch on the same weights; a report (report.md,
#                                        report.json and the logs) into OUTDIR
#
# With the device tool: run `pack` here, then
#   run(command="scripts/device-check.sh run $OUT", carry=[".device"], timeout_s=540)
# and copy $OUT's report.md into docs/BENCHMARKS.md ("GPU"). `run` finishes in under 8 minutes
# (its stages' limits add up to 7.6): the report says which stage ran out, if one did.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

pack() {
  set -e
  export CCACHE_BASEDIR=$(dirname "$root")
  # The package defaults: the CPU kernels are chosen at run time on the GPU machine's processor.
  cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DORZO_CUDA=ON -DORZO_NATIVE=OFF \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DCMAKE_CUDA_ARCHITECTURES=90-real >/dev/null
  cmake --build build-device -j"$(nproc)" --target orzo_tests orzo orzo-make-model gpu_bench
  rm -rf .device && mkdir -p .device/stage/build/tests .device/stage/build/cli .device/stage/build/tools \
    .device/stage/build/bench .device/stage/lib .device/stage/shared/models
  cp build-device/tests/orzo_tests .device/stage/build/tests/
  cp build-device/cli/orzo .device/stage/build/cli/
  cp build-device/tools/orzo-make-model .device/stage/build/tools/
  cp build-device/bench/gpu_bench .device/stage/build/bench/
  strip --strip-unneeded .device/stage/build/*/*
  # Every library the binaries load, but the C and C++ runtimes (the GPU image's are newer,
  # and its own tools need them), the driver and cuBLAS, which the image has and which is too
  # large to carry.
  ldd .device/stage/build/*/* | awk '/=> \//{print $3}' | sort -u |
    grep -vE '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcuda|libcublas|libcublasLt)\.so' |
    xargs -r cp -L -t .device/stage/lib/
  cp -rL ../shared/models/stories260K .device/stage/shared/models/
  # The tests name their data by this checkout's absolute paths; `run` links them there.
  printf 'SRC=%q\nSHARED=%q\n' "$root" "$(cd ../shared && pwd)" > .device/stage/paths.env
  tar -C .device/stage -cJf .device/device.tar.xz .
  rm -rf .device/stage
  grep -qx '/.device/' .git/info/exclude 2>/dev/null || echo '/.device/' >> .git/info/exclude
  echo "packed: $(du -h .device/device.tar.xz | cut -f1) in .device/device.tar.xz"
}

# Runs one stage under a time limit, its output into WORK/<name>.log; records its exit status.
stage() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" > "$WORK/$name.log" 2>&1
  local rc=$?
  echo "{\"stage\": \"$name\", \"rc\": $rc, \"seconds\": $((SECONDS - t0)), \"limit\": $limit}" >> "$WORK/stages.jsonl"
  echo "$name: rc $rc in $((SECONDS - t0)) s"
  return 0
}

run() {
  local out=${1:?usage: device-check.sh run OUTDIR}
  # Stages write into WORK; the report gathers what matters into OUTDIR (the device tool
  # brings back at most 8 files).
  WORK=$(mktemp -d)
  mkdir -p "$out"
  : > "$WORK/stages.jsonl"
  mkdir -p .device/unpacked
  tar -C .device/unpacked -xJf .device/device.tar.xz ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .device/device.tar.xz .device/unpacked
  local d=$root/.device/unpacked
  source "$d/paths.env"
  # Where the paths exist already (a rerun, or this very machine), they are left as they are.
  [ -e "$SRC" ] || { mkdir -p "$(dirname "$SRC")" && ln -s "$root" "$SRC"; }
  [ -e "$SHARED" ] || { mkdir -p "$(dirname "$SHARED")" && ln -s "$d/shared" "$SHARED"; }
  [ -e "$root/build-device" ] || ln -s "$d/build" "$root/build-device"
  # cuBLAS 13 from the GPU image: its CUDA toolkit, or the wheel PyTorch brings.
  local cublas
  cublas=$(ldconfig -p | awk '/libcublas\.so\.13/{print $NF; exit}')
  [ -n "$cublas" ] || cublas=$(find /usr/local /opt -maxdepth 9 -name 'libcublas.so.13*' 2>/dev/null | head -1)
  # Only orzo's binaries (and the sanitizer that runs one) see the carried libraries: PyTorch
  # keeps the image's own.
  local ours=(env "LD_LIBRARY_PATH=$d/lib${cublas:+:$(dirname "$cublas")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  export PYTHONUNBUFFERED=1
  nvidia-smi > "$WORK/nvidia-smi.log" 2>&1
  local sanitizer
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)

  local tests=$root/build-device/tests/orzo_tests
  stage gpu-tests 150 "${ours[@]}" "$tests" --gtest_filter='*Cuda*:DeviceSampling*' --gtest_output="json:$WORK/gpu-tests.json"
  stage sanitizer 80 "${ours[@]}" "${sanitizer:-compute-sanitizer}" --tool memcheck --error-exitcode 9 --print-limit 20 "$tests" \
    --gtest_filter='CudaKernels*:Elems/CudaAttention*:CudaSampling.*Tiny*:CudaSampling.Degenerate*:CudaBackend.*:Models/CudaBackendTwin.*/stories260K'
  stage make-model 30 "${ours[@]}" "$root/build-device/tools/orzo-make-model" --shape llama-3.2-1b --dtype bf16 \
    --format safetensors --out /tmp/orzo-llama-1b
  stage gpu-bench 90 "${ours[@]}" sh -c "'$root/build-device/bench/gpu_bench' -m /tmp/orzo-llama-1b \
    --logits-out /tmp/orzo-logits.bin > '$WORK/gpu-bench.json'"
  stage torch 60 python3 bench/torch_reference.py /tmp/orzo-llama-1b --orzo-logits /tmp/orzo-logits.bin \
    --json "$WORK/torch.json"
  # The same model through the whole runtime (sessions, batcher, a GPU worker): what the
  # actors add to the bare forward pass above.
  stage actors 45 "${ours[@]}" sh -c "'$root/build-device/cli/orzo' bench --actors --placement cuda:0 -m /tmp/orzo-llama-1b \
    --batch 64 --prompt 128 --gen 128 --ttft-probes 8 --json > '$WORK/actors.json'"
  python3 scripts/device_report.py "$WORK" "$out"
}

case "${1:-}" in
  pack) pack ;;
  run) run "${2:-}" ;;
  *) echo "usage: scripts/device-check.sh pack | run OUTDIR" >&2; exit 2 ;;
esac
