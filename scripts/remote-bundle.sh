#!/usr/bin/env bash
# Collects what a run on the GPU machine needs into .carry/ (git-ignored): stripped wsbench, test and benchmark
# executables, and the shared libraries that machine lacks (libbenchmark, libcpp-httplib), found through the
# executables' $ORIGIN rpath. The GPU machine has no package registry and no xxhash.h/httplib.h: build here.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
# The executables may come from another checkout (a clean snapshot): its path is what they were compiled with.
source_dir=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")
rm -rf .carry && mkdir -p .carry/tests .carry/bench .carry/src/tests .carry/src/models
echo "$source_dir" > .carry/SOURCE_DIR
cp -r "$source_dir/tests/fixtures" .carry/src/tests/
cp -r "$source_dir/models/profiles" .carry/src/models/

cp "$build/wsbench" .carry/
find "$build/tests" -maxdepth 1 -type f -name 'test_*' -perm -u+x -exec cp {} .carry/tests/ \;
find "$build/bench" -maxdepth 1 -type f -name 'bench_*' -perm -u+x -exec cp {} .carry/bench/ \; 2>/dev/null || true
strip --strip-all .carry/wsbench .carry/tests/* .carry/bench/* 2>/dev/null || true
for lib in libbenchmark.so.1debian libcpp-httplib.so.0.11; do
  src=$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')
  [ -n "$src" ] && cp -L "$src" .carry/tests/ && cp -L "$src" .carry/bench/ && cp -L "$src" .carry/
done
# The device tool carries at most 64 MiB: ship the test executables compressed (xz; the GPU machine unpacks them
# with Python's lzma, so it needs no xz binary).
tar cf - -C .carry tests | xz -T2 -6 > .carry/tests.tar.xz && rm -rf .carry/tests
du -sh .carry
