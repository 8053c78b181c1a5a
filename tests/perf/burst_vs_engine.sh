#!/usr/bin/env bash
# A burst against a local cluster (router + 1 prefill + 1 decode, stories260K, 1 thread each) and
# the same model's in-process decode throughput (tandem_decode_bench, batch 16), in one
# invocation; prints both and their ratio. Not a test: numbers go to docs/performance.md.
#
#   tests/perf/burst_vs_engine.sh [CONCURRENCY=1000] [OUTPUT_TOKENS=32] [POLICY=tandem]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
concurrency="${1:-1000}"
tokens="${2:-32}"
policy="${3:-tandem}"
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
burst="$(python3 tests/perf/bench/tandem_bench.py burst --url "http://127.0.0.1:$port" \
  --concurrency "$concurrency" --output-tokens "$tokens" --router-pid "$(cat "$run_dir/router.pid")")"
down
engine="$("$build_dir/tests/perf/tandem_decode_bench" "$model" 128 3 |
  awk '$1 == "fast" && $2 == 16 {print $3}')"
python3 - "$burst" "$engine" "$policy" <<'PY'
import json, sys
burst, engine, policy = json.loads(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
print(json.dumps({"policy": policy, **burst}))
print(f"cluster output tokens/s {burst['output_tokens_per_s']:.0f}, in-process decode (batch 16) "
      f"{engine:.0f} tokens/s: ratio {burst['output_tokens_per_s'] / engine:.3f}")
PY
