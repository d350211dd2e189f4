#!/usr/bin/env bash
# Sanitizer runs of the test suites, each in its own build directory (sanitizer runtimes cannot share one):
#   scripts/sanitize.sh thread   ThreadSanitizer (WSBENCH_TSAN) into build-tsan/: the engine and mode suites
#                                (tests/engine, modes, modes/refit, publication, publisher), where the scheduler,
#                                prepare workers, commit, generation and codec threads meet.
#   scripts/sanitize.sh address  ASan+UBSan (WSBENCH_SANITIZE) into build-asan-tests/: the unit and fault suites
#                                (tests/core, models, publication, publisher, modes, modes/refit, engine,
#                                engine_api, faults, reports, harness, cli). Not the
#                                soak: ASan's quarantine keeps freed memory resident, so its RSS-flatness verdict
#                                would judge the sanitizer, not wsbench.
# Only those test executables and their libraries are built (plus the wsbench executable the fault and harness
# suites start). Any sanitizer report fails its test: halt_on_error, and UBSan aborts instead of recovering.
# Extra arguments go to ctest (e.g. -R EngineProbeVersions). No CUDA: nvcc is left out (CMAKE_CUDA_COMPILER empty),
# the CPU backend is what runs without a GPU, and the GPU suites would only skip; SANITIZE_CUDA=1 keeps nvcc (the
# sanitizer flags still reach host C++ only). SANITIZE_JOBS sets the build jobs (default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
case "$mode" in
  thread) dir=build-tsan; option=-DWSBENCH_TSAN=ON; suites=(engine modes modes/refit publication publisher) ;;
  address) dir=build-asan-tests; option=-DWSBENCH_SANITIZE=ON
           suites=(core models publication publisher modes modes/refit engine engine_api faults reports harness cli) ;;
  *) echo "usage: scripts/sanitize.sh thread|address [ctest arguments]" >&2; exit 2 ;;
esac
shift

launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cuda=(-DCMAKE_CUDA_COMPILER=)
if [ "${SANITIZE_CUDA:-0}" = 1 ]; then
  cuda=()
  if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
fi
# -O1 with line tables (-g1): symbolized reports at a fraction of -O2 -g's compile time; NDEBUG stays unset so
# assertions fire too. Benchmarks are not built.
cmake -S . -B "$dir" "$option" -DWSBENCH_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" "${cuda[@]}" "${launcher[@]}" >/dev/null

# One executable per tests/<suite>/test_*.cpp, named as tests/CMakeLists.txt (wsbench_add_tests) names it; the ctest label
# of a suite is its folder with '/' as '_'.
targets=()
labels=()
for suite in "${suites[@]}"; do
  prefix=${suite//\//_}
  labels+=("$prefix")
  for src in tests/"$suite"/test_*.cpp; do
    stem=$(basename "$src" .cpp)
    targets+=("test_${prefix}_${stem#test_}")
  done
done
ctest_select=(-L "^($(IFS='|'; echo "${labels[*]}"))\$")
if [ "$mode" = address ]; then
  targets+=(wsbench)  # the fault and harness suites start it
fi
cmake --build "$dir" -j "${SANITIZE_JOBS:-$(nproc 2>/dev/null || echo 2)}" --target "${targets[@]}"

# halt_on_error: the first report ends the process, so the test fails and the report is the last thing it printed.
# die_after_fork=0: the refit's shm transport forks a sender process that starts its rank threads after the fork
# (modes/refit/sender_process.hpp); TSan cannot follow a multi-threaded fork's child, which then runs unchecked
# instead of being killed. The parent side, where the receivers and the engine run, stays fully checked.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 die_after_fork=0 ${TSAN_OPTIONS:-}"
export ASAN_OPTIONS="halt_on_error=1 detect_leaks=1 ${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1 ${UBSAN_OPTIONS:-}"
cd "$dir"
exec ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" "${ctest_select[@]}" "$@"
