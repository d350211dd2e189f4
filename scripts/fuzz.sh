#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang under ASan+UBSan into ./build-fuzz and runs each for
# SECONDS (default 30) over a fresh copy of its seed corpus (fuzz/corpus/<what>/), one process per target.
# Prints execs, exec/s, corpus size and exit status per target; exits non-zero when any target found a crash,
# leak, timeout or out-of-memory (the input lands in build-fuzz/fuzz-artifacts/).
# Environment: FUZZ_TARGETS="header xor_payload ..." runs a subset (names without the fuzz_ prefix, or any part of
# them; every target a part matches runs); FUZZ_RUNS=N also stops a target after N execs (whichever limit comes
# first); FUZZ_PARALLEL=N runs up to N targets at once (default 1); FUZZ_JOBS build jobs (default nproc). No GPU and
# no CUDA: the fuzz build leaves the CUDA language off.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
case "$seconds" in '' | *[!0-9]*) echo "usage: scripts/fuzz.sh [seconds_per_target]" >&2; exit 2 ;; esac

# libclang-rt-dev holds libFuzzer and the sanitizer runtimes; clang only recommends it.
scripts/install-deps.sh clang libclang-rt-dev
launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# -O1 with line tables: symbolized reports at a fifth less compile time than -O2 -g; NDEBUG stays unset so
# nlohmann's internal assertions fire. CMAKE_CUDA_COMPILER set empty skips check_language(CUDA).
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DWSBENCH_FUZZ=ON -DWSBENCH_TESTS=OFF -DWSBENCH_BENCH=OFF \
  -DCMAKE_CUDA_COMPILER= -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
  "${launcher[@]}" >/dev/null
cmake --build build-fuzz -j "${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}" --target fuzz

# target:max_len. JSON inputs: a few KiB hold every structure (real headers are longer only by repetition);
# payloads: room for the 1 MiB-tensor seeds (~17 KiB). The slowest target (xor: ~2,000 exec/s alone on an idle
# core, against 4,500-30,000 for the others) comes first: when FUZZ_RUNS ends the others early, it runs beside
# them in turn under FUZZ_PARALLEL=2.
targets=(xor_payload:32768 safetensors_header:8192 safetensors_file:8192 index_manifest:8192
         overwrite_payload:32768)
run_dir=build-fuzz/fuzz-run
artifacts=build-fuzz/fuzz-artifacts
mkdir -p "$artifacts"

# Runs one target; writes its summary line to $run_dir/<what>.line and its exit status to $run_dir/<what>.status.
run_target() {
  local what=$1 max_len=$2
  local corpus=$run_dir/$what log=$run_dir/$what.log status=0
  rm -rf "$corpus"
  mkdir -p "$corpus"
  cp fuzz/corpus/"$what"/* "$corpus"/
  local limit=(-max_total_time="$seconds")
  [ -n "${FUZZ_RUNS:-}" ] && limit+=(-runs="$FUZZ_RUNS")
  echo "== fuzz_$what: ${seconds} s${FUZZ_RUNS:+ or $FUZZ_RUNS runs}, max_len $max_len"
  # -malloc_limit_mb: the largest legal allocation is ~5 MiB (an overwrite body for a 1 MiB tensor); anything
  # near 64 MiB is a bomb that got through. -timeout: one input may take at most 10 s.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    build-fuzz/fuzz/fuzz_"$what" "${limit[@]}" -max_len="$max_len" -malloc_limit_mb=64 -rss_limit_mb=2048 \
    -timeout=10 -print_final_stats=1 -artifact_prefix="$artifacts/$what-" "$corpus" >"$log" 2>&1 || status=$?
  local execs rate files kib
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  files=$(find "$corpus" -type f | wc -l)
  kib=$(( $(du -sb "$corpus" | cut -f1) / 1024 ))
  printf '%-20s execs %-10s exec/s %-7s corpus %5s files %6s KiB  exit %s\n' "$what" "${execs:-?}" \
    "${rate:-?}" "$files" "$kib" "$status" | tee "$run_dir/$what.line"
  echo "$status" >"$run_dir/$what.status"
  if [ "$status" != 0 ]; then
    grep -E 'FUZZ FINDING|ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer)|runtime error|Test unit written' "$log" \
      | head -5 | sed "s/^/   $what: /" || true
    echo "   $what: full log: $log"
  fi
}

parallel=${FUZZ_PARALLEL:-1}
case "$parallel" in '' | *[!0-9]* | 0) echo "FUZZ_PARALLEL must be a positive integer" >&2; exit 2 ;; esac
selected_targets=()
for entry in "${targets[@]}"; do
  what=${entry%%:*}
  if [ -n "${FUZZ_TARGETS:-}" ]; then
    selected=0
    for want in $FUZZ_TARGETS; do [[ $what == *"$want"* ]] && selected=1; done
    [ "$selected" = 1 ] || continue
  fi
  selected_targets+=("$entry")
  rm -f "$run_dir/$what.line" "$run_dir/$what.status"
done
if [ "${#selected_targets[@]}" = 0 ]; then
  echo "FUZZ_TARGETS='${FUZZ_TARGETS:-}' names no target of: ${targets[*]%%:*}" >&2
  exit 2
fi
mkdir -p "$run_dir"
# A TERM or INT (a CI timeout, ^C) stops the fuzzers too: they share this script's process group.
trap 'trap - TERM INT; kill 0' TERM INT
running=0
for entry in "${selected_targets[@]}"; do
  if [ "$running" -ge "$parallel" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  run_target "${entry%%:*}" "${entry##*:}" &
  running=$((running + 1))
done
wait || true

failed=0
echo "== fuzz summary (${seconds} s${FUZZ_RUNS:+ or $FUZZ_RUNS runs} per target, $parallel at a time)"
for entry in "${selected_targets[@]}"; do
  what=${entry%%:*}
  if [ -f "$run_dir/$what.line" ]; then cat "$run_dir/$what.line"; else echo "$what: no result"; failed=1; fi
  [ "$(cat "$run_dir/$what.status" 2>/dev/null || echo 1)" = 0 ] || failed=1
done
exit "$failed"
