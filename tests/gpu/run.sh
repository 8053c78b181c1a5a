#!/usr/bin/env bash
# The one script to run on a machine with an NVIDIA GPU (docs/cuda.md): configures a build for the
# device's own architecture, builds only the GPU tests and the GPU planning tests, runs them and
# prints a summary. Exits non-zero if anything fails, and also if a `gpu` test skipped: on a GPU
# machine a skip means the device was not usable, which must not pass for success.
# Budget: 8 minutes on one H200 (16 cores); each step runs under what is left of it.
#
# env: BUILD_DIR (default: build-gpu), TANDEM_JOBS (default: nproc), GPU_BUDGET_S (default: 470)
set -euo pipefail

cd "$(dirname "$0")/../.."
build="${BUILD_DIR:-build-gpu}"
jobs="${TANDEM_JOBS:-$(nproc)}"
budget="${GPU_BUDGET_S:-470}"
start=$SECONDS
log_dir="$build/gpu-run"

left() { echo $((budget - (SECONDS - start))); }
step() {  # step NAME CMD...: runs CMD under the time left, logging to $log_dir/NAME.log
  local name="$1" t
  shift
  t=$(left)
  if ((t <= 0)); then
    echo "FAIL $name: no time left of the ${budget}s budget"
    exit 1
  fi
  local s=$SECONDS
  if ! timeout "$t" "$@" >"$log_dir/$name.log" 2>&1; then
    echo "FAIL $name after $((SECONDS - s))s (log: $log_dir/$name.log); its end:"
    tail -n 40 "$log_dir/$name.log"
    exit 1
  fi
  echo "ok   $name in $((SECONDS - s))s"
}

if ! command -v nvidia-smi >/dev/null; then
  echo "no nvidia-smi: this is not a GPU machine (the gpu tests only skip here; see docs/cuda.md)"
  exit 1
fi
# compute_cap is e.g. 9.0 (H100/H200) or 10.0 (B200); CMake wants 90 / 100. The first GPU decides.
cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' ')"
arch="${cap/./}"
if [[ ! "$arch" =~ ^[0-9]+$ ]]; then
  echo "cannot read the compute capability from nvidia-smi (got '$cap')"
  exit 1
fi
echo "== device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
  | head -n 1), sm_$arch; budget ${budget}s"

mkdir -p "$log_dir"
step configure cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTANDEM_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch"
step build cmake --build "$build" -j "$jobs" --target tandem_cuda_kernels_tests \
  tandem_gpu_plan_tests
# '^gpu$', not 'gpu': the planning tests' label is gpu_plan; they are run by name below.
# -V: every test's output in the log, skip messages included (they say why a test did not run).
step test ctest --test-dir "$build" -L '^gpu$' -V
step plan-test ctest --test-dir "$build" -L '^gpu_plan$' --output-on-failure

summary="$(grep -E 'tests passed|tests failed' "$log_dir/test.log" | tail -n 1)"
skipped="$(grep -c '(Skipped)' "$log_dir/test.log" || true)"
echo "== gpu tests: $summary; skipped: $skipped"
echo "== planning tests: $(grep -E 'tests passed|tests failed' "$log_dir/plan-test.log" | tail -n 1)"
if ((skipped > 0)); then
  echo "FAIL: $skipped gpu test(s) skipped on a GPU machine:"
  grep '(Skipped)' "$log_dir/test.log"
  echo "why (the tests' skip message):"
  grep -h 'no CUDA device' "$log_dir/test.log" | sed 's/^[0-9]*: //' | sort -u | head -n 5 || true
  exit 1
fi
echo "== all passed in $((SECONDS - start))s"
