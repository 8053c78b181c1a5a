#!/usr/bin/env bash
# Bursts against a local cluster (router + 1 prefill + 1 decode, stories260K, 1 thread each) and
# the same model's in-process decode throughput (tandem_decode_bench, batch 16), in one
# invocation; prints both and their ratio. Not a test: numbers go to docs/performance.md.
# Both sides take the best of BURSTS runs (the decode bench its best of 3): the machine is shared,
# and the best run is the least disturbed one. Every burst is printed.
#
#   tests/perf/burst_vs_engine.sh [CONCURRENCY=1000] [OUTPUT_TOKENS=32] [POLICY=tandem] [BURSTS=3]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
concurrency="${1:-1000}"
tokens="${2:-32}"
policy="${3:-tandem}"
bursts="${4:-3}"
build_dir="${BUILD_DIR:-$root/build}"
model="${TANDEM_MODEL:-$root/../shared/models/stories260K}"
if [[ ! -f "$model/model.bin" ]]; then
  echo "skipped: no stories260K at $model (set TANDEM_MODEL)" >&2
  exit 0
fi
run_dir="$(mktemp -d)"
port=$((20000 + RANDOM % 20000))
down() { TANDEM_RUN_DIR="$run_dir" deploy/local/down.sh >/dev/null 2>&1 || true; }
trap down EXIT
TANDEM_ROUTER_ROUTING_POLICY="$policy" TANDEM_SKIP_BUILD=1 TANDEM_MODEL="$model" \
  TANDEM_HTTP_PORT="$port" TANDEM_CONTROL_PORT="$((port + 1))" TANDEM_RUN_DIR="$run_dir" \
  BUILD_DIR="$build_dir" deploy/local/up.sh >/dev/null
runs=()
for ((i = 0; i < bursts; i++)); do
  runs+=("$(python3 tests/perf/bench/tandem_bench.py burst --url "http://127.0.0.1:$port" \
    --concurrency "$concurrency" --output-tokens "$tokens" --router-pid "$(cat "$run_dir/router.pid")")")
done
down
engine="$("$build_dir/tests/perf/tandem_decode_bench" "$model" 128 3 |
  awk '$1 == "fast" && $2 == 16 {print $3}')"
python3 - "$engine" "$policy" "${runs[@]}" <<'PY'
import json, sys
engine, policy = float(sys.argv[1]), sys.argv[2]
runs = [json.loads(r) for r in sys.argv[3:]]
for i, burst in enumerate(runs):
    print(json.dumps({"policy": policy, "burst": i + 1, **burst}))
best = max(runs, key=lambda r: r["output_tokens_per_s"])
print(f"cluster output tokens/s {best['output_tokens_per_s']:.0f} (best of {len(runs)} bursts: "
      + ", ".join(f"{r['output_tokens_per_s']:.0f}" for r in runs)
      + f"), in-process decode (batch 16) {engine:.0f} tokens/s: "
      f"ratio {best['output_tokens_per_s'] / engine:.3f}")
PY
