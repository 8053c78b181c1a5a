#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds, runs ctest, then the Python conformance
# tests (real SDKs against a real cluster) in a venv it creates.
# Usage: tests/run.sh            (env: BUILD_DIR=build, TANDEM_JOBS=<cores>)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build_dir="${BUILD_DIR:-build}"
jobs="${TANDEM_JOBS:-$(nproc)}"
# ccache keyed on paths relative to the checkout, so a clone anywhere (CI's) reuses what any other
# checkout of this machine compiled; without it a clone outside the configured base_dir compiles
# everything cold (main, variants and fuzz builds: most of CI's time).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"

"$root/tools/install_deps.sh"

cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build_dir" -j "$jobs"

if [[ ! -d ../shared ]]; then
  echo "note: ../shared is absent; tests that need the real model and fixtures will report SKIPPED"
fi

ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" --timeout 600

# The kernel and engine tests on the generic and AVX2 SIMD paths and under ASan + UBSan, the
# kernels under TSan, in build directories of their own (docs/performance.md).
# TANDEM_VARIANTS=0 skips them.
if [[ "${TANDEM_VARIANTS:-1}" != 0 ]]; then
  TANDEM_JOBS="$jobs" VARIANTS_DIR="${build_dir}-variants" "$root/tests/variants.sh"
fi

# Every parser of outside input under libFuzzer (ASan + UBSan), briefly: each target for
# TANDEM_FUZZ_SECONDS (docs/testing.md). TANDEM_FUZZ=0 skips them.
if [[ "${TANDEM_FUZZ:-1}" != 0 ]]; then
  TANDEM_JOBS="$jobs" FUZZ_BUILD_DIR="${build_dir}-fuzz" "$root/tests/fuzz/run.sh" \
    "${TANDEM_FUZZ_SECONDS:-10}"
fi

# Python side: only what tests/conformance needs (no torch: the reference fixtures are committed).
venv="$root/.venv"
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check -r tests/conformance/requirements.txt
TANDEM_BUILD_DIR="$root/$build_dir" "$venv/bin/python" -m pytest -q tests/conformance
# tandem-bench's own tests (trace parsing, malformed lines, a run against a fake server).
"$venv/bin/python" -m pytest -q tests/perf/bench
# The routing trace suite's generators and tools/sim/acceptance.py's criterion.
"$venv/bin/python" -m pytest -q tests/unit/routing
# deploy/k8s: every overlay rendered and validated for Kubernetes 1.31, and the per-stage policy
# (probes, drain hook, grace period, /dev/shm, PDB, autoscalers). Skips where kubectl is absent.
"$venv/bin/pip" install -q --disable-pip-version-check -r tests/deploy/requirements.txt
"$venv/bin/python" -m pytest -q tests/deploy
