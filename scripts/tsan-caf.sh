#!/usr/bin/env bash
# Builds the installed CAF again, with ThreadSanitizer, for the tsan preset (CMakePresets.json),
# which links it from build-tsan-caf/ (CAF_ROOT). TSan sees only the synchronization of code it
# instrumented: against Debian's libcaf_core, whose mailboxes and scheduler queues hand messages
# over with atomics TSan never sees, every message one actor sends another reads as a race.
# The source is the installed package's own (apt's source index, checked against its signed
# checksums), built with the configuration its headers were generated with, so the headers in
# /usr/include and these libraries agree.
#
#   scripts/tsan-caf.sh [PREFIX]    (default: build-tsan-caf/ in the source root; needs cmake, g++)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=$(realpath -m "${1:-$root/build-tsan-caf}")
work="$prefix/work"
read -r package version < <(dpkg-query -W -f='${source:Package} ${source:Version}\n' libcaf-dev)
upstream=${version%%-*}
if [ -f "$prefix/lib/libcaf_core.so" ] && [ "$(cat "$prefix/version" 2>/dev/null)" = "$version" ]; then
  echo "$prefix: CAF $version with TSan, already built"
  exit 0
fi

# The machine's own package sources, as source entries, in an apt state of their own: the
# system's configuration and package lists stay as they are.
mkdir -p "$work/apt/lists/partial"
{
  for f in /etc/apt/sources.list.d/*.sources; do [ -f "$f" ] && sed 's/^Types: *deb$/Types: deb-src/' "$f" && echo; done
} > "$work/apt/deb-src.sources"
apt_opts=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$work/apt" -o Dir::State::Lists="$work/apt/lists"
          -o APT::Sandbox::User=root)
[ -f /etc/apt/sources.list ] && sed -n 's/^deb /deb-src /p' /etc/apt/sources.list > "$work/apt/deb-src.list"
apt-get "${apt_opts[@]}" update -qq
(cd "$work" && apt-get "${apt_opts[@]}" source --download-only --tar-only "$package=$version")

rm -rf "$work/src" && mkdir -p "$work/src"
tar xzf "$work/${package}_${upstream}.orig.tar.gz" -C "$work/src" --strip-components=1
# Debian patches its headers (an #include <limits> g++ 12 needs); the installed ones are the
# headers orzo compiles against, so they replace the tarball's.
find "$work/src"/libcaf_{core,io,openssl} -path '*/caf/*' -name '*.hpp' | while read -r h; do
  installed="/usr/include/caf/${h#*/caf/}"
  if [ -f "$installed" ]; then cp "$installed" "$h"; fi
done
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$work/src" -B "$work/build" -G Ninja "${launcher[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DCAF_LOG_LEVEL=QUIET -DCAF_NO_EXAMPLES=yes -DCAF_NO_UNIT_TESTS=yes \
  -DCAF_NO_TOOLS=yes -DCAF_NO_PYTHON=yes -DCAF_NO_OPENCL=yes -DCAF_NO_SUMMARY=yes -DCAF_NO_COMPILER_CHECK=yes
nice -n 10 cmake --build "$work/build" -j "$(nproc)"
cmake --install "$work/build"
echo "$version" > "$prefix/version"
echo "$prefix: CAF $version with TSan"
