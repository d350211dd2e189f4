#!/usr/bin/env bash
# Install, build, and run every test with ctest (GPU tests skip when no device is present).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd build
exec ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" "$@"
