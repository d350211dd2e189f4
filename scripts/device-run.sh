#!/usr/bin/env bash
# Runs on the GPU machine (device tool), from the repository root, after scripts/device-bundle.sh here.
# Writes logs and results under $OUT: every test executable, the smoke matrix, the benchmarks, the floors.
set -uo pipefail
out=${OUT:-/tmp/wsbench-device}
mkdir -p "$out"
# Tests were compiled with absolute fixture/profile paths of the build machine's checkout: recreate that path.
source_dir=$(cat .carry/SOURCE_DIR)
mkdir -p "$(dirname "$source_dir")" && [ -e "$source_dir" ] || ln -s "$PWD/.carry/src" "$source_dir"
export WSBENCH_PROFILES=$PWD/.carry/src/models/profiles
[ -f .carry/tests.tgz ] && tar xzf .carry/tests.tgz -C .carry
export LD_LIBRARY_PATH=$PWD/.carry:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv > "$out/gpu.csv" 2>&1
mkdir -p "$out/gtest"
pass=0; fail=0
for t in .carry/tests/test_*; do
  name=$(basename "$t")
  if "$t" --gtest_output="json:$out/gtest/$name.json" > "$out/gtest/$name.log" 2>&1; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAILED $name"; fi
done
echo "test executables: $pass passed, $fail failed" | tee "$out/tests.txt"
.carry/wsbench physics --dir /tmp --bytes $((1<<30)) --threads 16 | tee "$out/physics.txt"
.carry/wsbench run .carry/src/matrices/smoke.json --out "$out/smoke" | tee "$out/smoke.txt"
for b in .carry/bench/bench_*; do "$b" --benchmark_format=json --benchmark_out="$out/$(basename "$b").json" --benchmark_out_format=json | tail -20; done
# The device tool returns at most 8 files: pack the folders.
tar czf "$out/gtest.tgz" -C "$out" gtest && rm -rf "$out/gtest"
[ -d "$out/smoke" ] && tar czf "$out/smoke.tgz" -C "$out" smoke && rm -rf "$out/smoke"
ls -la "$out"
