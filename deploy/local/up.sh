#!/usr/bin/env bash
# Starts a local tandem cluster on loopback: router + 1 prefill + 1 decode worker (+ 1 vision
# encoder when TANDEM_VISION_MODEL is set).
#
#   deploy/local/up.sh            # then: deploy/local/down.sh
#
# Environment (all optional):
#   TANDEM_MODEL        model directory (default: ../shared/models/stories260K when present, else
#                       a cached copy in ~/.cache/tandem/models/stories260K, else downloaded there)
#   TANDEM_HTTP_PORT    router HTTP port (default 8000)
#   TANDEM_CONTROL_PORT router control (gRPC) port (default 50051)
#   TANDEM_THREADS      compute threads per worker (default 1)
#   TANDEM_RUN_DIR      where pid files and logs go (default deploy/local/.run)
#   TANDEM_SKIP_BUILD   1: do not (re)build
#   TANDEM_VISION_MODEL a vision tower directory: also start tandem-encoder with it (a DeepSeek
#                       V4.1 model served with TANDEM_CHAT_FORMAT=deepseek-v4.1 then reads images)
#   TANDEM_CHAT_FORMAT  the router's --chat-format (default auto)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
run_dir="${TANDEM_RUN_DIR:-$root/deploy/local/.run}"
http_port="${TANDEM_HTTP_PORT:-8000}"
control_port="${TANDEM_CONTROL_PORT:-50051}"
threads="${TANDEM_THREADS:-1}"
build_dir="${BUILD_DIR:-$root/build}"

if [[ -e "$run_dir/router.pid" ]] && kill -0 "$(cat "$run_dir/router.pid")" 2>/dev/null; then
  echo "a cluster started from $run_dir is already running; run deploy/local/down.sh first" >&2
  exit 1
fi

resolve_model() {
  if [[ -n "${TANDEM_MODEL:-}" ]]; then echo "$TANDEM_MODEL"; return; fi
  if [[ -f "$root/../shared/models/stories260K/model.bin" ]]; then
    echo "$root/../shared/models/stories260K"; return
  fi
  local cache="${XDG_CACHE_HOME:-$HOME/.cache}/tandem/models/stories260K"
  if [[ ! -f "$cache/model.bin" || ! -f "$cache/tokenizer.bin" ]]; then
    # The model's public home: Andrej Karpathy's tinyllamas on the Hugging Face hub (MIT).
    local hub="https://huggingface.co/karpathy/tinyllamas/resolve/main/stories260K"
    echo "downloading stories260K into $cache" >&2
    mkdir -p "$cache"
    curl -fL --retry 3 -o "$cache/model.bin.part" "$hub/stories260K.bin" >&2
    curl -fL --retry 3 -o "$cache/tokenizer.bin.part" "$hub/tok512.bin" >&2
    mv "$cache/model.bin.part" "$cache/model.bin"
    mv "$cache/tokenizer.bin.part" "$cache/tokenizer.bin"
  fi
  echo "$cache"
}

"$root/tools/install_deps.sh"
if [[ "${TANDEM_SKIP_BUILD:-0}" != 1 ]]; then
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build_dir" --target tandem-router tandem-prefill tandem-decode tandem-encoder
fi
model="$(resolve_model)"
mkdir -p "$run_dir"
rm -f "$run_dir"/*.pid "$run_dir"/*.port

start() {  # name, then the command
  local name=$1; shift
  "$@" >"$run_dir/$name.log" 2>&1 &
  echo $! >"$run_dir/$name.pid"
}

# The router's prefix index is read at random on every decision: on 2 MiB pages its p99 stays
# ~13 us instead of 14-140 us (docs/routing.md, "Decision latency"); glibc < 2.35 ignores this.
start router env GLIBC_TUNABLES="${GLIBC_TUNABLES:-glibc.malloc.hugetlb=1}" \
  "$build_dir/services/router/tandem-router" --model "$model" \
  --http-listen "127.0.0.1:$http_port" --control-listen "127.0.0.1:$control_port" \
  --port-file "$run_dir/router.port" --chat-format "${TANDEM_CHAT_FORMAT:-auto}"
served_name="$(basename "$model")"
roles=(router prefill decode)
start prefill "$build_dir/services/prefill/tandem-prefill" --model "$model" \
  --router "127.0.0.1:$control_port" --threads "$threads" --port-file "$run_dir/prefill.port"
start decode "$build_dir/services/decode/tandem-decode" --model "$model" \
  --router "127.0.0.1:$control_port" --threads "$threads" --port-file "$run_dir/decode.port"
if [[ -n "${TANDEM_VISION_MODEL:-}" ]]; then
  start encoder "$build_dir/services/encoder/tandem-encoder" --model "$TANDEM_VISION_MODEL" \
    --served-model-name "$served_name" --router "127.0.0.1:$control_port" --threads "$threads" \
    --port-file "$run_dir/encoder.port"
  roles+=(encoder)
fi

url="http://127.0.0.1:$http_port"
for _ in $(seq 1 300); do
  if curl -fsS "$url/ready" >/dev/null 2>&1; then
    cat <<EOT
tandem is up: $url  (model: $(basename "$model"); logs: $run_dir)

curl -N $url/v1/chat/completions -H 'Content-Type: application/json' \\
  -d '{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":64,"stream":true}'

stop it with: deploy/local/down.sh
EOT
    exit 0
  fi
  for name in "${roles[@]}"; do
    if ! kill -0 "$(cat "$run_dir/$name.pid")" 2>/dev/null; then
      echo "$name exited during start-up; its log:" >&2
      tail -n 20 "$run_dir/$name.log" >&2
      "$root/deploy/local/down.sh" >/dev/null 2>&1 || true
      exit 1
    fi
  done
  sleep 0.2
done
echo "the cluster did not become ready within 60 s; logs are in $run_dir" >&2
"$root/deploy/local/down.sh" >/dev/null 2>&1 || true
exit 1
