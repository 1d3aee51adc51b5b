#!/usr/bin/env bash
# The package test (ctest: package.embedded): installs a built orzo into a scratch prefix,
# builds a copy of examples/embedded against that prefix alone, with the compiler and build
# type of the orzo build, and runs it greedily on stories260K; then the installed `orzo
# generate`, given no -m, must run the default model installed beside it.
#   scripts/test-package.sh BUILD_DIR MODEL
# The scratch dir (BUILD_DIR/package-test) keeps its paths from run to run so that ccache
# serves the example's one object again; it is emptied first, so every run is a fresh
# install and a fresh configure.
set -euo pipefail
if (($# != 2)); then
  echo "usage: $0 BUILD_DIR MODEL" >&2
  exit 2
fi
src="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "$1" && pwd)"
model="$2"
work="$build/package-test"
fail() {
  echo "package test: $*" >&2
  exit 1
}
cached() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
# Runs a step with its output in a log, shown only when the step fails.
step() {
  local name="$1"
  shift
  "$@" >"$work/$name.log" 2>&1 || { cat "$work/$name.log" >&2; fail "$name failed (log above)"; }
}

rm -rf "$work"
mkdir -p "$work"
step install cmake --install "$build" --prefix "$work/prefix"

# Every installed header must compile with nothing but the install on the include path:
# this is what catches a header the API includes and cmake/package.cmake does not install.
headers="$work/all_headers.cpp"
(cd "$work/prefix/include/orzo" && find . -name '*.hpp' | sort |
  sed 's|^\./\(.*\)|#include "\1"|') >"$headers"
"$(cached CMAKE_CXX_COMPILER)" -std=c++17 -fsyntax-only -I"$work/prefix/include/orzo" "$headers" ||
  fail "the installed headers do not compile on their own"

cp -r "$src/examples/embedded" "$work/embedded"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
step configure cmake -S "$work/embedded" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_CXX_COMPILER="$(cached CMAKE_CXX_COMPILER)" -DCMAKE_BUILD_TYPE="$(cached CMAKE_BUILD_TYPE)" \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "${launcher[@]}"
step build cmake --build "$work/build"

# The proof that it was built against the install: the headers come from the prefix, and
# neither a compile command nor the link line names any path in orzo's source tree, other
# than the scratch dir itself when the build dir lies inside the source tree.
grep -qF -- "$work/prefix/include/orzo" "$work/build/compile_commands.json" ||
  fail "the example was not compiled against $work/prefix/include/orzo"
grep -qF -- "$work/prefix/lib" "$work/build/build.ninja" || fail "the example was not linked against $work/prefix/lib"
if sed "s|$work||g" "$work/build/compile_commands.json" "$work/build/build.ninja" | grep -F -- "$src"; then
  fail "the example's build reaches into the source tree $src (lines above)"
fi

out="$("$work/build/orzo-embedded" "$model" "Once upon a time" 32)" || fail "orzo-embedded failed: $out"
echo "$out"
grep -qF "there was a little girl named Lily" <<<"$out" || fail "not the greedy stories260K completion"
grep -qF "[finish: length; 32 tokens" <<<"$out" || fail "expected 32 tokens, finish reason length"

story="$("$work/prefix/bin/orzo" generate --temperature 0 -n 32 -t 1 2>&1)" || fail "installed orzo generate failed: $story"
grep -qF ": $work/prefix/share/orzo/stories260K/stories260K.gguf)" <<<"$story" ||
  fail "the installed orzo did not run the default model under $work/prefix/share/orzo: $story"
grep -qF "there was a little girl named Lily" <<<"$story" || fail "not the greedy stories260K story: $story"
