#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, in their own build directory) and runs each
# for SECONDS, starting from the committed seeds (tests/fuzz/corpus/<target>) plus what earlier
# runs found (<build>/corpus/<target>). Stops at the first target that crashes, leaks or times out;
# the input that did it is in <build>/artifacts/. bench_trace is tandem-bench's Python trace reader
# under atheris, installed from PyPI into <build>/pyvenv on first use. Appends each run's executions to
# <build>/executions.tsv, so the per-target totals over many runs stay countable.
# Usage: tests/fuzz/run.sh SECONDS [TARGET...]
#   env: FUZZ_BUILD_DIR=build-fuzz, TANDEM_JOBS=<cores>, FUZZ_ARGS="extra libFuzzer flags"
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
seconds="${1:?usage: tests/fuzz/run.sh SECONDS [TARGET...]}"
shift
build_dir="${FUZZ_BUILD_DIR:-build-fuzz}"
jobs="${TANDEM_JOBS:-$(nproc)}"

targets=("$@")
if ((${#targets[@]} == 0)); then
  targets=(http_request recipe_chat recipe_responses recipe_messages recipe_stream
    router_completions tokenizer_json tokenizer_text llama2c_tokenizer safetensors model_loader
    sim_trace proto_messages image_decode bench_trace)
fi
cc_targets=()
for t in "${targets[@]}"; do [[ "$t" == bench_trace ]] || cc_targets+=("fuzz_$t"); done

if [[ ! -f "$build_dir/build.ninja" ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTANDEM_FUZZ=ON -DTANDEM_ENABLE_CUDA=OFF >/dev/null
fi
if ((${#cc_targets[@]})); then cmake --build "$build_dir" -j "$jobs" --target "${cc_targets[@]}"; fi
venv="$build_dir/pyvenv"
if [[ " ${targets[*]} " == *" bench_trace "* ]] && ! "$venv/bin/python" -c "import atheris" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check atheris
fi

# halt_on_error: UBSan findings abort like ASan's, so libFuzzer keeps the input.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
mkdir -p "$build_dir/artifacts"
printf '%-20s %12s %10s %8s\n' target executions exec/s corpus
for t in "${targets[@]}"; do
  work="$build_dir/corpus/$t"
  mkdir -p "$work"
  log="$build_dir/artifacts/$t.log"
  fuzzer=("$build_dir/tests/fuzz/fuzz_$t")
  [[ "$t" == bench_trace ]] && fuzzer=("$venv/bin/python" tests/fuzz/bench_trace_fuzz.py)
  # New inputs go to the first directory only: the committed seeds stay as they are.
  # shellcheck disable=SC2086
  if ! "${fuzzer[@]}" -max_total_time="$seconds" -timeout=60 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$build_dir/artifacts/$t-" ${FUZZ_ARGS:-} \
      "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz: $t failed (log: $log; input: $build_dir/artifacts/$t-*)" >&2
    exit 1
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  printf '%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$t" "$seconds" "${execs:-0}" \
    >>"$build_dir/executions.tsv"
  printf '%-20s %12s %10s %8s\n' "$t" "${execs:-?}" "${rate:-?}" "$(ls "$work" | wc -l)"
done
