#!/usr/bin/env bash
# The main job: install, build, run the smoke matrix on the embedded CPU engine, print its tables.
# Results land in results/smoke/ (results.json, report.md). Exit status is non-zero when any check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
WSBENCH_TARGETS=wsbench scripts/build.sh
exec build/wsbench run matrices/smoke.json --out results/smoke "$@"
