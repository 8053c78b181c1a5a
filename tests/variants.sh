#!/usr/bin/env bash
# The unit tests whose results depend on how the code is compiled, in builds other than the
# default -march=native one: the portable build as shipped (every ISA copy of the CPU kernels,
# chosen at run time), the generic SIMD path alone, and AddressSanitizer + UBSan and
# ThreadSanitizer. Each variant has its own build directory under $VARIANTS_DIR (generic and
# portable share one) and builds only the test executables it runs.
# docs/performance.md cites this script; tests/run.sh runs it.
#
# Usage: tests/variants.sh [variant...]     (default: generic portable asan tsan, in this order)
#   generic  -DTANDEM_NATIVE=OFF, only the generic  kernels and engine tests (the portable path)
#            kernel copy
#   portable -DTANDEM_NATIVE=OFF, every ISA copy    kernels tests on each copy this CPU runs, the
#            (the container image's build; "avx2"   engine tests on the best one, and the check
#            is an alias)                           that no copy's AVX code leaks into shared code
#   asan     -fsanitize=address,undefined (native)  kernels and engine tests
#   asan-router  the asan build                     router tests; not in the default list: its
#                                                   build (gRPC, HTTP, recipe) takes longer than
#                                                   the whole default stage
#   asan-all     ASan + UBSan, every target         the whole ctest suite (unit, integration with
#                (own dir: asan-all)                the sanitized binaries as processes, perf
#                                                   smoke); not in the default list: docs/testing.md
#                                                   gives its time. ASAN_JOBS: ctest's parallelism
#                                                   (default 1: the cluster tests time streams)
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

# variant NAME DIR TARGETS -- CMAKE_ARGS... -- CTEST_ARGS...: 0 when the build and every test
# passed. A failing variant does not stop the others.
variant() {
  local name="$1" build="$dir/$2" targets="$3" start=$SECONDS rc=0
  shift 4
  local cmake_args=()
  while [[ "$1" != -- ]]; do cmake_args+=("$1"); shift; done
  shift
  echo "== variant $name: ${cmake_args[*]}"
  cmake -S . -B "$build" -G Ninja "${cmake_args[@]}" >/dev/null || rc=1
  # shellcheck disable=SC2086
  [[ $rc -ne 0 ]] || cmake --build "$build" -j "$jobs" --target $targets || rc=1
  [[ $rc -ne 0 ]] || ctest --test-dir "$build" --output-on-failure -j "$jobs" --timeout 600 "$@" ||
    rc=1
  echo "== variant $name: $((SECONDS - start)) s, $([[ $rc -eq 0 ]] && echo passed || echo FAILED)"
  return $rc
}

# Release (no debug info) for the SIMD paths; the sanitizer builds keep line tables for their
# reports and -O1 for speed.
portable=(-DCMAKE_BUILD_TYPE=Release -DTANDEM_NATIVE=OFF)
sanitized=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -g1 -DNDEBUG")
sanitize="-fno-omit-frame-pointer -fno-sanitize-recover=all -fsanitize"
selected=("$@")
[[ ${#selected[@]} -gt 0 ]] || selected=(generic portable asan tsan)
failed=()
start=$SECONDS
for v in "${selected[@]}"; do
  case "$v" in
    generic)
      variant generic portable "tandem_kernels_tests tandem_engine_tests" -- "${portable[@]}" \
        -DTANDEM_KERNELS_FLAGS= -DTANDEM_KERNELS_ISAS=generic -- -L '^(kernels|engine)$' ||
        failed+=("$v")
      ;;
    portable|avx2)
      # Only the kernels differ from the generic variant's build: the engine tests link them,
      # nothing else depends on the SIMD path. The kernels tests run each copy the CPU has.
      variant portable portable "tandem_kernels_tests tandem_engine_tests" -- "${portable[@]}" \
        -DTANDEM_KERNELS_FLAGS= "-DTANDEM_KERNELS_ISAS=generic;avx2;avx512" \
        -- -L '^(kernels|engine)$' || failed+=("$v")
      ;;
    asan)
      variant asan asan "tandem_kernels_tests tandem_engine_tests" -- \
        "${sanitized[@]}" "-DCMAKE_CXX_FLAGS=$sanitize=address,undefined" \
        -- -L '^(kernels|engine)$' || failed+=("$v")
      ;;
    asan-router)
      variant asan-router asan tandem_router_tests -- \
        "${sanitized[@]}" "-DCMAKE_CXX_FLAGS=$sanitize=address,undefined" \
        -- -L '^router$' || failed+=("$v")
      ;;
    asan-all)
      # Every target, so the integration tests run the sanitized router and workers as their
      # processes. LeakSanitizer stays on: a server that leaks at exit fails its test. Exits by
      # signal (the tests SIGKILL servers) are not reported, nothing runs at exit then.
      # UCX's memory hooks patch malloc and mmap, which ASan owns: off (KV over UCX registers
      # its pool once and needs no memory events).
      UCX_MEM_EVENTS=no variant asan-all asan-all all -- \
        "${sanitized[@]}" "-DCMAKE_CXX_FLAGS=$sanitize=address,undefined" \
        -- -j "${ASAN_JOBS:-1}" || failed+=("$v")
      ;;
    tsan)
      variant tsan tsan tandem_kernels_tests -- \
        "${sanitized[@]}" "-DCMAKE_CXX_FLAGS=$sanitize=thread" -- -L '^kernels$' || failed+=("$v")
      ;;
    *) echo "unknown variant '$v' (generic, portable, asan, tsan, asan-router, asan-all)" >&2
       exit 2 ;;
  esac
done
echo "== variants: $((SECONDS - start)) s"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "== variants FAILED: ${failed[*]}" >&2
  exit 1
fi
