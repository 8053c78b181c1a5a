#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds, runs ctest (and the Python tests when present).
# Usage: tests/run.sh            (env: BUILD_DIR=build, TANDEM_JOBS=<cores>)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build_dir="${BUILD_DIR:-build}"
jobs="${TANDEM_JOBS:-$(nproc)}"

"$root/tools/install_deps.sh"

cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build_dir" -j "$jobs"

if [[ ! -d ../shared ]]; then
  echo "note: ../shared is absent; tests that need the real model and fixtures will report SKIPPED"
fi

ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" --timeout 600
