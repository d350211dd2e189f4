#!/usr/bin/env bash
# Configures and builds wsbench into ./build (Release with debug info). CUDA sources compile when nvcc is found.
# Extra arguments go to cmake's configure step. Idempotent: re-running only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
# nvcc is usually outside PATH on a fresh machine; let CMake find it where the CUDA toolkit installs.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
# WSBENCH_TARGETS limits the build (e.g. "wsbench" for the main job); default: everything, tests included.
cmake --build build -j "$jobs" ${WSBENCH_TARGETS:+--target $WSBENCH_TARGETS}
