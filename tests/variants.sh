#!/usr/bin/env bash
# The unit tests whose results depend on how the code is compiled, in builds other than the
# default -march=native one: the portable ("generic") and AVX2 SIMD paths of the CPU kernels, and
# AddressSanitizer + UBSan and ThreadSanitizer. Each variant has its own build directory under
# $VARIANTS_DIR and builds only the test executables it runs (ccache shares what it can).
# docs/performance.md cites this script; tests/run.sh runs it.
#
# Usage: tests/variants.sh [variant...]     (default: all of them, in this order)
#   generic  -DTANDEM_NATIVE=OFF                    kernels and engine tests
#   avx2     generic, kernels with -march=haswell   kernels and engine tests
#   asan     -fsanitize=address,undefined (native)  kernels, engine and router tests
#   tsan     -fsanitize=thread (native)             kernels tests (thread pool, multithreaded ops,
#                                                   concurrent callers of one backend)
# The router is not run under TSan: absl and gRPC come from Debian packages built without it, so
# TSan cannot see absl::Mutex and would report every field it guards as a race.
# env: TANDEM_JOBS (default: nproc), VARIANTS_DIR (default: build-variants)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
jobs="${TANDEM_JOBS:-$(nproc)}"
dir="${VARIANTS_DIR:-build-variants}"

# Sanitizer findings must fail the test, not scroll past: UBSan does not recover, and the
# sanitizers' exit codes make the test process fail.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}"

# Objects that do not depend on the variant's flags are shared between variant directories
# through ccache: paths are hashed relative to the tree and debug info is not per directory.
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1

# variant NAME TARGETS -- CMAKE_ARGS... -- CTEST_ARGS...
variant() {
  local name="$1" targets="$2" build="$dir/$1" start=$SECONDS
  shift 3
  local cmake_args=()
  while [[ "$1" != -- ]]; do cmake_args+=("$1"); shift; done
  shift
  echo "== variant $name: ${cmake_args[*]}"
  cmake -S . -B "$build" -G Ninja "${cmake_args[@]}" >/dev/null
  # shellcheck disable=SC2086
  cmake --build "$build" -j "$jobs" --target $targets
  ctest --test-dir "$build" --output-on-failure -j "$jobs" --timeout 600 "$@"
  echo "== variant $name: $((SECONDS - start)) s"
}

# Release (no debug info) for the SIMD paths; the sanitizer builds keep line tables for their
# reports and -O1 for speed.
portable=(-DCMAKE_BUILD_TYPE=Release -DTANDEM_NATIVE=OFF)
sanitized=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -g1 -DNDEBUG")
sanitize="-fno-omit-frame-pointer -fno-sanitize-recover=all -fsanitize"
selected=("$@")
[[ ${#selected[@]} -gt 0 ]] || selected=(generic avx2 asan tsan)
for v in "${selected[@]}"; do
  case "$v" in
    generic)
      variant generic "tandem_kernels_tests tandem_engine_tests" -- "${portable[@]}" \
        -DTANDEM_KERNELS_FLAGS= -- -L '^(kernels|engine)$'
      ;;
    avx2)
      # Only the kernels and their tests are compiled for AVX2; the engine tests link them.
      variant avx2 "tandem_kernels_tests tandem_engine_tests" -- "${portable[@]}" \
        -DTANDEM_KERNELS_FLAGS=-march=haswell -- -L '^(kernels|engine)$'
      ;;
    asan)
      variant asan "tandem_kernels_tests tandem_engine_tests tandem_router_tests" -- \
        "${sanitized[@]}" "-DCMAKE_CXX_FLAGS=$sanitize=address,undefined" \
        -- -L '^(kernels|engine|router)$'
      ;;
    tsan)
      variant tsan tandem_kernels_tests -- \
        "${sanitized[@]}" "-DCMAKE_CXX_FLAGS=$sanitize=thread" -- -L '^kernels$'
      ;;
    *) echo "unknown variant '$v' (generic, avx2, asan, tsan)" >&2; exit 2 ;;
  esac
done
