#!/usr/bin/env bash
# Bundles built binaries for a remote GPU host that has no compiler (and no package registry, no xxhash.h or
# httplib.h), so the tree is built here and only the results of the build travel.
#
# Usage: [WSBENCH_CARRY_TESTS=REGEX] [WSBENCH_CARRY_SRC=1] scripts/remote-bundle.sh [BUILD_DIR]   (default: build)
#   WSBENCH_CARRY_TESTS: only the test executables whose whole file name matches REGEX (e.g. 'test_engine_.*');
#   WSBENCH_CARRY_SRC=1: also copy the sources the tests read (step 2), for a host that gets .carry/ alone.
#
# Steps:
#   1. read the source directory the build was configured from (CMakeCache.txt's CMAKE_HOME_DIRECTORY; the build may
#      come from another checkout, e.g. a clean snapshot) and record it in .carry/SOURCE_DIR: the test executables
#      carry that absolute path for their fixtures and profiles, and scripts/remote-run.sh recreates it remotely;
#      likewise the build directory (.carry/BUILD_DIR), where the tests that start the real wsbench look for it;
#   2. with WSBENCH_CARRY_SRC=1, copy that checkout's tests/fixtures/, models/profiles/, matrices/ and the results
#      files of docs/validation/ into .carry/src/ (the tests read them through the source directory's absolute path);
#      by default the checkout copied beside .carry/ serves them, so build from that checkout (its HEAD is recorded
#      in .carry/SOURCE_COMMIT and remote-run.sh warns when the checkout there differs);
#   3. copy BUILD_DIR/wsbench, every test executable (BUILD_DIR/tests/test_<folder>_<name>) and every benchmark
#      executable (BUILD_DIR/bench/bench_<name>), and strip them;
#   4. copy the shared libraries they need that are not linked statically, libbenchmark.so.1debian and
#      libcpp-httplib.so.0.11 (found with ldconfig), beside each executable folder: wsbench and the benchmarks find
#      them through their $ORIGIN rpath, the tests through the LD_LIBRARY_PATH remote-run.sh sets;
#   5. pack the test executables into one xz archive (tests.tar.xz; much smaller to copy, and unpacked remotely with
#      Python's lzma module, so the remote host needs no xz binary).
#
# Output: .carry/ (git-ignored) in the repository root, replaced on every run:
#   .carry/wsbench, .carry/lib*.so*             the CLI and the shared libraries
#   .carry/bench/bench_<name>, .carry/bench/lib*.so*
#   .carry/tests.tar.xz                         tests/test_<folder>_<name> and the shared libraries
#   .carry/src/tests/fixtures, .carry/src/models/profiles, .carry/src/matrices, .carry/src/docs/validation
#                                               (WSBENCH_CARRY_SRC=1 only)
#   .carry/SOURCE_DIR, .carry/BUILD_DIR         the build's source and build directories
#   .carry/SOURCE_COMMIT                        the source checkout's HEAD (git rev-parse), when it is a git checkout
# Copy the repository checkout (matrices/, tests/interop/, scripts/) together with .carry/ to the remote host, then
# run scripts/remote-run.sh there from the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
source_dir=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")
rm -rf .carry && mkdir -p .carry/tests .carry/bench
echo "$source_dir" > .carry/SOURCE_DIR
echo "$build" > .carry/BUILD_DIR
git -C "$source_dir" rev-parse HEAD > .carry/SOURCE_COMMIT 2>/dev/null || rm -f .carry/SOURCE_COMMIT
# WSBENCH_CARRY_SRC=1: also copy the fixtures, profiles, matrices and validation results into .carry/src/, for a
# remote host that gets .carry/ without the checkout; by default the checkout that travels beside .carry/ serves them.
if [ "${WSBENCH_CARRY_SRC:-0}" = 1 ]; then
  mkdir -p .carry/src/tests .carry/src/models
  cp -r "$source_dir/tests/fixtures" .carry/src/tests/
  cp -r "$source_dir/models/profiles" .carry/src/models/
  cp -r "$source_dir/matrices" .carry/src/
  (cd "$source_dir" && find docs/validation -name '*results*.json' -exec cp --parents {} "$OLDPWD/.carry/src/" \;)
fi

cp "$build/wsbench" .carry/
# WSBENCH_CARRY_TESTS=REGEX: only the test executables whose name matches (the carry is limited in size).
find "$build/tests" -maxdepth 1 -type f -name 'test_*' -perm -u+x -regextype egrep -regex ".*/(${WSBENCH_CARRY_TESTS:-.*})" \
  -exec cp {} .carry/tests/ \;
find "$build/bench" -maxdepth 1 -type f -name 'bench_*' -perm -u+x -exec cp {} .carry/bench/ \; 2>/dev/null || true
strip --strip-all .carry/wsbench .carry/tests/* .carry/bench/* 2>/dev/null || true
for lib in libbenchmark.so.1debian libcpp-httplib.so.0.11; do
  path=$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')
  [ -n "$path" ] && cp -L "$path" .carry/tests/ && cp -L "$path" .carry/bench/ && cp -L "$path" .carry/
done
tar cf - -C .carry tests | xz -T2 -6 > .carry/tests.tar.xz && rm -rf .carry/tests
du -sh .carry
