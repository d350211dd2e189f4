#!/usr/bin/env bash
# Runs on the GPU machine (device tool), from the repository root, after scripts/device-bundle.sh here.
# Usage: scripts/device-run.sh STEP...   (default: tests physics smoke smoke-cuda interop bench)
#   tests        every test executable (GoogleTest JSON per executable); tests=REGEX: those whose name matches
#   physics      wsbench physics (host memcpy, disk read, pinned H2D per chunk size)
#   smoke        matrices/smoke.json (embedded CPU engine)
#   smoke-cuda   matrices/smoke-cuda.json (CUDA backend)
#   serve-cuda   matrices/serve-cuda.json (wsbench serve on the CUDA backend, driven over HTTP)
#   interop      tests/interop/interop_check.py against torch + safetensors
#   bench        every benchmark executable (Google Benchmark JSON)
#   h200=REGEX   matrices/h200.json, cells whose id matches REGEX (results under h200/)
# Writes logs and results under $OUT, packed so that at most 8 files come back.
set -uo pipefail
out=${OUT:-/tmp/wsbench-device}
mkdir -p "$out"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests physics smoke smoke-cuda interop bench)
# Tests were compiled with absolute fixture/profile paths of the build machine's checkout: recreate that path.
source_dir=$(cat .carry/SOURCE_DIR)
mkdir -p "$(dirname "$source_dir")" && [ -e "$source_dir" ] || ln -s "$PWD/.carry/src" "$source_dir"
export WSBENCH_PROFILES=$PWD/.carry/src/models/profiles
# Tests that run the real executable find it at the build machine's build/wsbench.
# (The checkout may sit at that very path on the GPU machine, without the ignored build/: link it there too.)
mkdir -p .carry/src/build && ln -sf "$PWD/.carry/wsbench" .carry/src/build/wsbench
mkdir -p "$source_dir/build" && { [ -e "$source_dir/build/wsbench" ] || ln -sf "$PWD/.carry/wsbench" "$source_dir/build/wsbench"; }
[ -f .carry/tests.tar.xz ] && [ ! -d .carry/tests ] && python3 -c "import tarfile; tarfile.open('.carry/tests.tar.xz').extractall('.carry')"
export LD_LIBRARY_PATH=$PWD/.carry:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv > "$out/gpu.csv" 2>&1
mkdir -p "$out/logs"
# A step may carry a time limit in seconds (STEP@SECONDS): the device tool kills a command at its limit, so each step
# is bounded and the results are still packed.
run_step() {
  local step=$1
  case "$step" in
    tests|tests=*)
      mkdir -p "$out/logs/gtest"
      pass=0; fail=0; only=.
      [[ "$step" == tests=* ]] && only=${step#tests=}
      for t in .carry/tests/test_*; do
        name=$(basename "$t")
        [[ "$name" == *.so* ]] && continue
        [[ "$name" =~ $only ]] || continue
        if timeout 300 "$t" --gtest_output="json:$out/logs/gtest/$name.json" > "$out/logs/gtest/$name.log" 2>&1; then
          pass=$((pass+1)); else fail=$((fail+1)); echo "FAILED $name"; grep -E "^\[  FAILED|Failure|error" "$out/logs/gtest/$name.log" | head -8; fi
      done
      echo "test executables: $pass passed, $fail failed" | tee "$out/logs/tests.txt" ;;
    physics) .carry/wsbench physics --dir /tmp --bytes $((1<<30)) --threads 16 | tee "$out/logs/physics.txt" ;;
    smoke) .carry/wsbench run matrices/smoke.json --filter /native/ --out "$out/logs/smoke" > "$out/logs/smoke.txt" 2>&1; echo "smoke rc $?"; tail -30 "$out/logs/smoke.txt" ;;
    smoke-cuda) .carry/wsbench run matrices/smoke-cuda.json --out "$out/logs/smoke-cuda" > "$out/logs/smoke-cuda.txt" 2>&1; echo "smoke-cuda rc $?"; tail -40 "$out/logs/smoke-cuda.txt" ;;
    serve-cuda) .carry/wsbench run matrices/serve-cuda.json --out "$out/logs/serve-cuda" > "$out/logs/serve-cuda.txt" 2>&1; echo "serve-cuda rc $?"; tail -40 "$out/logs/serve-cuda.txt" ;;
    interop) PYTHONUNBUFFERED=1 python3 tests/interop/interop_check.py --wsbench .carry/wsbench --profiles .carry/src/models/profiles --out "$out/logs/interop" > "$out/logs/interop.txt" 2>&1; echo "interop rc $?"; tail -25 "$out/logs/interop.txt" ;;
    bench)
      for b in .carry/bench/bench_*; do
        [[ "$b" == *.so* ]] && continue
        timeout 240 "$b" --benchmark_format=console --benchmark_out="$out/logs/$(basename "$b").json" --benchmark_out_format=json > "$out/logs/$(basename "$b").txt" 2>&1; echo "$(basename "$b") rc $?"; tail -25 "$out/logs/$(basename "$b").txt"
      done ;;
    h200=*) regex=${step#h200=}
      # Results go straight under $OUT so the cells that finished survive a step killed at its limit; the trial
      # workdirs (stores, checkpoints) are moved to /tmp by a link, never packed.
      # Each h200 step of one call gets its own folder (h200, h200-2, ...), so a later step never overwrites cells.
      dir=h200; k=1; while [ -e "$out/logs/$dir" ]; do k=$((k+1)); dir=h200-$k; done
      rm -rf /tmp/h200-work  # the previous step's stores: the disk holds one step's at a time
      mkdir -p "$out/logs/$dir" /tmp/h200-work && ln -sfn /tmp/h200-work "$out/logs/$dir/work"
      echo "$regex" > "$out/logs/$dir/filter.txt"
      .carry/wsbench run matrices/h200.json --filter "$regex" --out "$out/logs/$dir" > "$out/logs/$dir.txt" 2>&1; echo "h200 rc $?"
      tail -60 "$out/logs/$dir.txt" ;;
    bench-device) .carry/bench/bench_bench_device --short --benchmark_out="$out/logs/bench_device.json" --benchmark_out_format=json > "$out/logs/bench_device.txt" 2>&1; echo "bench_device rc $?"; tail -30 "$out/logs/bench_device.txt" ;;
    *) echo "unknown step $step" ;;
  esac
}
export -f run_step 2>/dev/null
for spec in "${steps[@]}"; do
  step=${spec%@*}; limit=600
  [[ "$spec" == *@* ]] && limit=${spec##*@}
  t0=$(date +%s)
  export out
  timeout --kill-after=5 "$limit" bash -c "$(declare -f run_step); run_step '$step'" || echo "step $step ended with $? (limit $limit s)"
  echo "step $step: $(( $(date +%s) - t0 )) s"
done
rm -f "$out"/logs/h200*/work; rm -rf /tmp/h200-work
tar czf "$out/logs.tgz" -C "$out" logs && rm -rf "$out/logs"
ls -la "$out"
