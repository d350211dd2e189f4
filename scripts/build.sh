#!/usr/bin/env bash
# Configures and builds wsbench into ./build (Release with debug info). CUDA sources compile when nvcc is found.
# Extra arguments go to cmake's configure step. Idempotent: re-running only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
# nvcc is usually outside PATH on a fresh machine; let CMake find it where the CUDA toolkit installs.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
# ccache (installed by install-deps.sh) makes rebuilds and fresh clones on the same machine cheap; paths are made
# relative to the checkout so another clone of the same tree hits the same cache entries.
launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" "$@" >/dev/null
# WSBENCH_TARGETS limits the build (e.g. "wsbench" for the main job); default: everything, tests included.
cmake --build build -j "$jobs" ${WSBENCH_TARGETS:+--target $WSBENCH_TARGETS}
