#!/usr/bin/env bash
# The container image of deploy/images/: it starts under podman with no network, its binaries
# answer --version/--help, it runs as a non-root user under tini, and its runtime stage carries no
# compiler or -dev package. Exit 77 (ctest: skipped) where podman cannot run containers or the
# image has not been built; ctest never builds it (deploy/images/build.sh takes tens of minutes).
#
#   TANDEM_IMAGE=localhost/tandem:dev tests/deploy/image_test.sh
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
image="${TANDEM_IMAGE:-localhost/tandem:dev}"

skip() { echo "SKIPPED: $*"; exit 77; }
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

command -v podman >/dev/null ||
  skip "podman is not installed (the image test needs it; deploy/images/build.sh installs it)"
podman image exists "$image" 2>/dev/null ||
  skip "image $image is absent: build it with deploy/images/build.sh (ctest does not build it)"
# shellcheck source=../../deploy/images/podman-env.sh
source "$root/deploy/images/podman-env.sh"
# Whether containers can start at all is probed with coreutils' true, so that a broken tandem
# binary fails the test below instead of being mistaken for a host that cannot run containers.
tandem_podman_flags "$image" true ||
  skip "podman cannot start containers on this machine: $TANDEM_PODMAN_ERROR"
run() { podman run --rm --network=none "${TANDEM_PODMAN_FLAGS[@]}" "$image" "$@"; }

out=$(run tandem-router --version 2>&1)
if [[ "$out" =~ ^tandem-router\ [0-9]+\.[0-9]+\.[0-9]+\ \(commit\ [0-9a-z-]+, ]]; then
  pass "tandem-router --version: $out"
else
  fail "tandem-router --version printed: $out"
fi
out=$(run tandem-router --help 2>&1)
if [[ $? -eq 0 && "$out" == *"--http-listen"* && "$out" == *"--control-listen"* ]]; then
  pass "tandem-router --help"
else
  fail "tandem-router --help: $out"
fi
for bin in tandem-prefill tandem-decode tandem-worker; do
  out=$(run "$bin" --help 2>&1)
  if [[ $? -eq 0 && "$out" == *"--drain-timeout-ms"* ]]; then pass "$bin --help"; else fail "$bin --help: $out"; fi
done
# Every binary is there and its shared libraries resolve (the runtime stage installs exactly the
# packages that own them).
out=$(run sh -c 'for b in tandem-router tandem-prefill tandem-decode tandem-worker tandem-generate \
    tandem-tokenize tandem-recipe tandem-sim; do p=$(command -v $b) || { echo "missing $b"; continue; }
  ldd "$p" | grep "not found" | sed "s|^|$b: |"; done' 2>&1)
if [[ -z "$out" ]]; then pass "all binaries present, libraries resolved"; else fail "$out"; fi

uid=$(run id -u 2>&1)
[[ "$uid" =~ ^[0-9]+$ && "$uid" -ne 0 ]] && pass "runs as uid $uid" || fail "runs as uid '$uid'"
entry=$(podman image inspect --format '{{json .Config.Entrypoint}}' "$image")
[[ "$entry" == *tini* ]] && pass "entrypoint $entry" || fail "entrypoint is $entry, not tini"
# The runtime stage: no compiler, no headers.
out=$(run sh -c 'command -v g++ c++ cc cmake; dpkg-query -W -f="\${Package}\n" | grep -- "-dev$"' 2>&1)
[[ -z "$out" ]] && pass "no compiler or -dev packages" || fail "runtime stage carries: $out"

if ((failures)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "image $image: all checks passed"
