#!/usr/bin/env bash
# Router memory per open, idle stream: a local cluster (router + 1 prefill + 1 decode,
# stories260K) whose router lets one generation out at a time and whose decode worker is frozen,
# so every stream waits in the router's queue (the lease is long, so the frozen worker is not
# declared down); the bench opens N streams and samples the router's
# RSS and thread count. Not a test: numbers go to docs/performance.md.
#
#   tests/perf/idle_streams.sh [STREAMS=10000]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
streams="${1:-10000}"
build_dir="${BUILD_DIR:-$root/build}"
model="${TANDEM_MODEL:-$root/../shared/models/stories260K}"
if [[ ! -f "$model/model.bin" ]]; then
  echo "skipped: no stories260K at $model (set TANDEM_MODEL)" >&2
  exit 0
fi
# Each stream is a connection: a file descriptor in the router and one in the client.
ulimit -n "$((streams + 1024))"
run_dir="$(mktemp -d)"
port=$((20000 + RANDOM % 20000))
down() {
  [[ -f "$run_dir/decode.pid" ]] && kill -CONT "$(cat "$run_dir/decode.pid")" 2>/dev/null || true
  TANDEM_RUN_DIR="$run_dir" deploy/local/down.sh >/dev/null 2>&1 || true
}
trap down EXIT
TANDEM_ROUTER_MAX_IN_FLIGHT=1 TANDEM_ROUTER_MAX_QUEUE_LENGTH="$((streams + 100))" \
  TANDEM_ROUTER_MAX_QUEUE_WAIT_MS=3600000 TANDEM_ROUTER_HTTP_MAX_CONNECTIONS="$((streams + 100))" \
  TANDEM_ROUTER_WORKER_LEASE_MS=3600000 \
  TANDEM_SKIP_BUILD=1 TANDEM_MODEL="$model" TANDEM_HTTP_PORT="$port" \
  TANDEM_CONTROL_PORT="$((port + 1))" TANDEM_RUN_DIR="$run_dir" BUILD_DIR="$build_dir" \
  deploy/local/up.sh >/dev/null
url="http://127.0.0.1:$port"
# One request first, so that the router's channels to the workers exist before the freeze.
curl -fsS "$url/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt": "once", "max_tokens": 2}' >/dev/null
router_pid="$(cat "$run_dir/router.pid")"
threads_before="$(awk '/^Threads:/ {print $2}' "/proc/$router_pid/status")"
kill -STOP "$(cat "$run_dir/decode.pid")"
python3 tests/perf/bench/tandem_bench.py idle --url "$url" --router-pid "$router_pid" \
  --streams "$streams" --settle-s 300 &
bench=$!
# Sample the router's threads while the streams are held.
sleep 20
threads_during="$(awk '/^Threads:/ {print $2}' "/proc/$router_pid/status")"
wait "$bench"
echo "{\"router_threads_idle\": $threads_before, \"router_threads_with_streams\": $threads_during}"
