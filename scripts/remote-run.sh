#!/usr/bin/env bash
# Runs a list of steps on a remote GPU host from binaries bundled by scripts/remote-bundle.sh: the tests, the physics
# floors, the smoke matrices on the CPU and CUDA backends, a matrix, the benchmarks. Writes logs and results under an
# output folder.
#
# Usage (on the remote host, from the repository root, with .carry/ from remote-bundle.sh beside it):
#   OUT=DIR scripts/remote-run.sh [STEP[@SECONDS]...]
#   default steps: tests physics smoke smoke-cuda interop bench;  default OUT: /tmp/wsbench-device
#
# Steps:
#   tests          every test executable (.carry/tests/test_<folder>_<name>, 300 s each), GoogleTest JSON per
#                  executable; tests=REGEX: those whose name matches REGEX
#   physics        wsbench physics --dir /tmp --bytes 1GiB --threads 16 (host memcpy, disk read, pinned H2D per chunk)
#   smoke          matrices/smoke.json, its native cells (embedded CPU engine)
#   smoke-cuda     matrices/smoke-cuda.json (CUDA backend)
#   serve-cuda     matrices/serve-cuda.json (wsbench serve on the CUDA backend, driven over HTTP)
#   interop        tests/interop/interop_check.py against torch + safetensors
#   bench          every benchmark executable (.carry/bench/bench_<name>, 240 s each), Google Benchmark JSON
#   bench=NAME[,FILTER]  .carry/bench/bench_NAME alone (the benchmarks matching FILTER), JSON as bench_NAME.json;
#                  settings the benchmark reads from the environment (WSBENCH_PREPARE_SIZE, TMPDIR, ...) pass through
#   bench-device   bench_device alone, with --short
#   h200=REGEX     matrices/h200.json, the cells whose id matches REGEX
#   matrix=NAME[,REGEX]  matrices/NAME.json (its cells whose id matches REGEX), results under logs/NAME/ (a later
#                  step of the same matrix: logs/NAME-2/, ...)
#   fixtures       tests/fixtures/make_hf_tiny.py rebuilt into /tmp and compared byte for byte with the committed
#                  fixtures (needs torch and transformers); the directories that differ come back in logs/fixtures-new/
# Each step runs under a time limit, 600 s unless given as STEP@SECONDS (e.g. h200=llama@900): a step that hangs
# is ended (then killed 5 s later), and the later steps and the packing still run. Each step prints its exit
# status, the tail of its log and its wall time.
#
# The remote host needs: Linux x86-64 with a glibc no older than the build host's; the NVIDIA driver with nvidia-smi
# (the CUDA runtime is linked statically; CUPTI is opened at run time when present); bash, coreutils (timeout), tar,
# gzip, python3 (it unpacks the tests; the interop step also needs torch and safetensors); write access to /tmp (the
# disk-read floor, the h200 stores) and to the parent folders of the build host's source and build directories (the
# test executables carry those absolute paths: they are recreated as links into .carry/).
#
# Outputs under OUT:
#   gpu.csv      nvidia-smi: name, driver, memory, PCI bus id
#   logs.tgz     logs/ packed at the end:
#                  gtest/<exe>.json, gtest/<exe>.log, tests.txt (executables passed/failed)
#                  physics.txt; smoke/, smoke-cuda/, serve-cuda/ (wsbench run --out: results.json, report.md, cells/)
#                  and their console logs smoke.txt, smoke-cuda.txt, serve-cuda.txt
#                  interop/, interop.txt; bench_<name>.json and .txt per benchmark; bench_device-short.json and .txt
#                  h200/, h200-2/, ... (one folder per h200 step: results, filter.txt) and h200.txt, h200-2.txt, ...
set -uo pipefail
out=${OUT:-/tmp/wsbench-device}
mkdir -p "$out"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests physics smoke smoke-cuda interop bench)
# Tests were compiled with absolute fixture/profile paths of the build host's checkout: recreate that path.
# The sources are .carry/src/ when the bundle copied them (WSBENCH_CARRY_SRC=1), else this checkout.
source_dir=$(cat .carry/SOURCE_DIR)
src=$PWD/.carry/src; [ -d "$src" ] || src=$PWD
if [ "$src" = "$PWD" ] && [ -f .carry/SOURCE_COMMIT ]; then
  here=$(git rev-parse HEAD 2>/dev/null || true)  # a copy without .git cannot tell
  [ -z "$here" ] || [ "$here" = "$(cat .carry/SOURCE_COMMIT)" ] ||
    echo "warning: binaries built from $(cat .carry/SOURCE_COMMIT), this checkout is at $here: fixtures and matrices are this checkout's"
fi
mkdir -p "$(dirname "$source_dir")" && [ -e "$source_dir" ] || ln -s "$src" "$source_dir"
export WSBENCH_PROFILES=$src/models/profiles
# Tests that run the real executable find it in the build host's build directory (source/build by default).
# (The checkout may sit at that very path on the remote host, without the ignored build/: link it there too.)
mkdir -p "$src/build" && { [ -e "$src/build/wsbench" ] || ln -sf "$PWD/.carry/wsbench" "$src/build/wsbench"; }
mkdir -p "$source_dir/build" && { [ -e "$source_dir/build/wsbench" ] || ln -sf "$PWD/.carry/wsbench" "$source_dir/build/wsbench"; }
if [ -f .carry/BUILD_DIR ]; then
  build_dir=$(cat .carry/BUILD_DIR)
  mkdir -p "$build_dir" && { [ -e "$build_dir/wsbench" ] || ln -sf "$PWD/.carry/wsbench" "$build_dir/wsbench"; }
fi
[ -f .carry/tests.tar.xz ] && [ ! -d .carry/tests ] && python3 -c "import tarfile; tarfile.open('.carry/tests.tar.xz').extractall('.carry')"
export LD_LIBRARY_PATH=$PWD/.carry:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv > "$out/gpu.csv" 2>&1
mkdir -p "$out/logs"
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
    interop) PYTHONUNBUFFERED=1 python3 tests/interop/interop_check.py --wsbench .carry/wsbench --profiles "$src/models/profiles" --out "$out/logs/interop" > "$out/logs/interop.txt" 2>&1; echo "interop rc $?"; tail -25 "$out/logs/interop.txt" ;;
    bench)
      for b in .carry/bench/bench_*; do
        [[ "$b" == *.so* ]] && continue
        timeout 240 "$b" --benchmark_format=console --benchmark_out="$out/logs/$(basename "$b").json" --benchmark_out_format=json > "$out/logs/$(basename "$b").txt" 2>&1; echo "$(basename "$b") rc $?"; tail -25 "$out/logs/$(basename "$b").txt"
      done ;;
    bench=*) spec=${step#bench=}; name=${spec%%,*}; filter=.
      [[ "$spec" == *,* ]] && filter=${spec#*,}
      ".carry/bench/bench_$name" --benchmark_filter="$filter" --benchmark_format=console --benchmark_out="$out/logs/bench_$name.json" --benchmark_out_format=json > "$out/logs/bench_$name.txt" 2>&1; echo "bench_$name rc $?"; tail -40 "$out/logs/bench_$name.txt" ;;
    h200=*) regex=${step#h200=}
      # Results go straight under $out/logs so the cells that finished survive a step ended at its limit; the trial
      # workdirs (stores, checkpoints) live in /tmp behind a link and are never packed.
      # Each h200 step gets its own folder (h200, h200-2, ...), so a later step never overwrites cells.
      dir=h200; k=1; while [ -e "$out/logs/$dir" ]; do k=$((k+1)); dir=h200-$k; done
      rm -rf /tmp/h200-work  # the previous step's stores: the disk holds one step's at a time
      mkdir -p "$out/logs/$dir" /tmp/h200-work && ln -sfn /tmp/h200-work "$out/logs/$dir/work"
      echo "$regex" > "$out/logs/$dir/filter.txt"
      .carry/wsbench run matrices/h200.json --filter "$regex" --out "$out/logs/$dir" > "$out/logs/$dir.txt" 2>&1; echo "h200 rc $?"
      tail -60 "$out/logs/$dir.txt" ;;
    matrix=*) spec=${step#matrix=}; name=${spec%%,*}; regex=.
      [[ "$spec" == *,* ]] && regex=${spec#*,}
      # Each step of one matrix gets its own folder (NAME, NAME-2, ...), so a later step never overwrites cells.
      dir=$name; k=1; while [ -e "$out/logs/$dir" ]; do k=$((k+1)); dir=$name-$k; done
      rm -rf /tmp/matrix-work && mkdir -p "$out/logs/$dir" /tmp/matrix-work && ln -sfn /tmp/matrix-work "$out/logs/$dir/work"
      echo "$regex" > "$out/logs/$dir/filter.txt"
      .carry/wsbench run "matrices/$name.json" --filter "$regex" --out "$out/logs/$dir" > "$out/logs/$dir.txt" 2>&1; echo "$name rc $?"
      rm -f "$out/logs/$dir/work"; tail -60 "$out/logs/$dir.txt" ;;
    fixtures)
      rm -rf /tmp/fixtures-again && python3 tests/fixtures/make_hf_tiny.py --out /tmp/fixtures-again > "$out/logs/fixtures.txt" 2>&1; echo "make_hf_tiny rc $?"
      for d in /tmp/fixtures-again/hf-*; do
        n=$(basename "$d")
        if diff -rq "$d" "tests/fixtures/$n" >> "$out/logs/fixtures.txt" 2>&1; then echo "$n identical"; else echo "$n DIFFERS"; mkdir -p "$out/logs/fixtures-new" && cp -r "$d" "$out/logs/fixtures-new/"; fi
      done | tee -a "$out/logs/fixtures.txt"; cp /tmp/fixtures-again/*.json "$out/logs/" 2>/dev/null; tail -5 "$out/logs/fixtures.txt" ;;
    # Written as bench_device-short.* so that it never overwrites the bench step's bench_device.* of the same run.
    bench-device) .carry/bench/bench_device --short --benchmark_out="$out/logs/bench_device-short.json" --benchmark_out_format=json > "$out/logs/bench_device-short.txt" 2>&1; echo "bench_device rc $?"; tail -30 "$out/logs/bench_device-short.txt" ;;
    *) echo "unknown step $step" ;;
  esac
}
export -f run_step 2>/dev/null
for spec in "${steps[@]}"; do
  step=${spec%@*}; limit=600
  [[ "$spec" == *@* ]] && limit=${spec##*@}
  t0=$(date +%s)
  export out src
  timeout --kill-after=5 "$limit" bash -c "$(declare -f run_step); run_step '$step'" || echo "step $step ended with $? (limit $limit s)"
  echo "step $step: $(( $(date +%s) - t0 )) s"
done
rm -f "$out"/logs/h200*/work; rm -rf /tmp/h200-work
tar czf "$out/logs.tgz" -C "$out" logs && rm -rf "$out/logs"
ls -la "$out"
