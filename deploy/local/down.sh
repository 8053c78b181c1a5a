#!/usr/bin/env bash
# Stops exactly the processes deploy/local/up.sh started (by their pid files), nothing else.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
run_dir="${TANDEM_RUN_DIR:-$root/deploy/local/.run}"
stopped=0
for name in encoder decode prefill router; do
  pid_file="$run_dir/$name.pid"
  [[ -f "$pid_file" ]] || continue
  pid="$(cat "$pid_file")"
  # Only signal the pid if it is still the process we started (pids get reused).
  if kill -0 "$pid" 2>/dev/null && grep -q "tandem-$name" "/proc/$pid/cmdline" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    echo "stopped $name (pid $pid)"
    stopped=$((stopped + 1))
  fi
  rm -f "$pid_file" "$run_dir/$name.port"
done
[[ $stopped -gt 0 ]] || echo "nothing to stop"
