#!/usr/bin/env bash
# Mutation check of the safety-critical lines: applies each deliberate bug below, one at a time,
# to a scratch copy of the tree, rebuilds, runs the tests that guard that line, and reports
# whether some test failed (KILLED) or all passed (SURVIVED: the tests cannot see that bug).
# Exits 1 if any mutation survived, 2 if the setup failed (a pattern no longer matches its file,
# or the unmutated tests fail).
#
# Usage: tools/mutate.sh [NAME...]     (default: every mutation; --list prints them)
# env:   MUTATE_DIR   scratch directory, kept between runs so rebuilds are incremental
#                     (default /tmp/tandem-mutate)
#        MUTATE_TREE  HEAD (default: the committed tree, via git archive) or worktree (tracked
#                     and untracked files as they are now)
#        TANDEM_JOBS  build parallelism (default: nproc)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
scratch="${MUTATE_DIR:-/tmp/tandem-mutate}"
tree="${MUTATE_TREE:-HEAD}"
jobs="${TANDEM_JOBS:-$(nproc)}"

# name | file | replacements (old => new, separated by ' ;; ') | tests: test binaries, each
# optionally with =GTEST_FILTER (the suites that guard the line).
# Each `old` must occur exactly once in its file.
MUTATIONS=(
  "gate-no-fence|common/transport/src/gate.cc|IssuePuts(ops, write.data);=>IssuePuts(ops, write.data); return;|tandem_transport_tests tandem_worker_tests"
  "gate-flags-first|common/transport/src/gate.cc|IssuePuts(ops, write.data);=>IssuePuts(ops, write.flags); ;; flags_ = write.flags;=>flags_ = write.data;|tandem_transport_tests tandem_worker_tests"
  "ucx-flush-noop|common/transport/src/ucx_agent.cc|return Track(ucp_ep_flush_nbx(ep_, &param), \"flush\");=>return absl::OkStatus();|tandem_transport_tests"
  "sender-flags-as-data|services/worker/kv_sender.cc|write.data.push_back({local=>write.flags.push_back({local ;; write.flags.push_back({&flag_value=>write.data.push_back({&flag_value|tandem_worker_tests"
  "receiver-any-flag-value|services/worker/kv_receiver.cc|.load(std::memory_order_acquire) != h.flag_value) {=>.load(std::memory_order_acquire) == 0) {|tandem_worker_tests"
  "receiver-last-flag-only|services/worker/kv_receiver.cc|for (std::int32_t b : h.blocks) {=>for (std::int32_t b : {h.blocks.back()}) {|tandem_worker_tests"
  "receiver-no-flag-reset|services/worker/kv_receiver.cc|for (std::int32_t b : blocks) std::atomic_ref<std::uint64_t>(flags_[b]).store(0);=>(void)blocks;|tandem_worker_tests"
  "receiver-lease-never-expires|services/worker/kv_receiver.cc|!h.committing && now > h.deadline=>false|tandem_worker_tests"
  "receiver-abandon-frees-at-once|services/worker/kv_receiver.cc|if (AllFlagsSet(it->second)) {=>if (true) {|tandem_worker_tests"
  "block-acquire-no-ref|common/engine/src/block_manager.cc|if (m.ref_count++ == 0) evictable_.erase(m.lru_pos);=>if (m.ref_count == 0) evictable_.erase(m.lru_pos);|tandem_engine_tests=BlockManagerTest.*:EngineTest.*"
  "block-release-ignores-refs|common/engine/src/block_manager.cc|if (--m.ref_count > 0) continue;=>--m.ref_count;|tandem_engine_tests=BlockManagerTest.*:EngineTest.*"
  "hash-ignores-parent|common/base/src/hash.cc|std::uint64_t h = FnvStart(parent + kParentSeedOffset);=>std::uint64_t h = FnvStart(kParentSeedOffset);|tandem_base_tests"
  "hash-token-shortcut|common/base/src/hash.cc|if ((u >> 16) == 0) return (h ^ (u >> 8)) * kFnvPrime3;=>if ((u >> 16) == 0) return (h ^ (u >> 8)) * kFnvPrime2;|tandem_base_tests"
)

if [[ "${1:-}" == "--list" ]]; then
  for m in "${MUTATIONS[@]}"; do IFS='|' read -r name file _ tests <<<"$m"; echo "$name  ($file; $tests)"; done
  exit 0
fi
wanted=("$@")
selected=()
for m in "${MUTATIONS[@]}"; do
  name="${m%%|*}"
  if [[ ${#wanted[@]} -eq 0 ]] || printf '%s\n' "${wanted[@]}" | grep -qx "$name"; then selected+=("$m"); fi
done
[[ ${#selected[@]} -gt 0 ]] || { echo "no mutation named ${wanted[*]} (see --list)" >&2; exit 2; }

src="$scratch/src"
build="$scratch/build"
log="$scratch/log"
rm -rf "$log"
mkdir -p "$scratch" "$log"
echo "scratch copy of $tree in $src"
rm -rf "$src.new"
mkdir -p "$src.new"
if [[ "$tree" == worktree ]]; then
  (cd "$root" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) |
    tar -x -C "$src.new"
else
  git -C "$root" archive "$tree" | tar -x -C "$src.new"
fi
# Replace the copy only where files differ, so unchanged sources keep their mtimes and the
# scratch build stays incremental between runs.
python3 - "$src.new" "$src" <<'EOF'
import filecmp, os, shutil, sys
new, old = sys.argv[1], sys.argv[2]
keep = set()
for d, _, files in os.walk(new):
    for f in files:
        rel = os.path.relpath(os.path.join(d, f), new)
        keep.add(rel)
        dst = os.path.join(old, rel)
        if not os.path.exists(dst) or not filecmp.cmp(os.path.join(d, f), dst, shallow=False):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(os.path.join(d, f), dst)
            shutil.copymode(os.path.join(d, f), dst)
for d, _, files in os.walk(old):
    for f in files:
        if os.path.relpath(os.path.join(d, f), old) not in keep:
            os.remove(os.path.join(d, f))
EOF
rm -rf "$src.new"

# Files that fail to build from the copy would make every mutation look killed.
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$log/configure.log" 2>&1 ||
  { echo "configure failed: $log/configure.log" >&2; exit 2; }

all_tests=$(for m in "${selected[@]}"; do IFS='|' read -r _ _ _ tests <<<"$m"; echo "$tests"; done |
  tr ' ' '\n' | sort -u | tr '\n' ' ')
targets=$(echo "$all_tests" | tr ' ' '\n' | sed 's/=.*//' | sort -u | tr '\n' ' ')

# run_tests LABEL BINARIES: 0 when every binary passes.
run_tests() {
  local label="$1" rc=0 list t
  read -ra list <<<"$2"  # no globbing of the filters
  for t in "${list[@]}"; do
    local binary="${t%%=*}" filter="*"
    [[ "$t" == *=* ]] && filter="${t#*=}"
    timeout 600 "$build/tests/$binary" --gtest_filter="$filter" >>"$log/$label.$binary.log" 2>&1 ||
      rc=1
  done
  return $rc
}

echo "baseline: building $targets"
start=$SECONDS
# shellcheck disable=SC2086
cmake --build "$build" -j "$jobs" --target $targets >"$log/baseline.build.log" 2>&1 ||
  { echo "baseline build failed: $log/baseline.build.log" >&2; exit 2; }
run_tests baseline "$all_tests" ||
  { echo "baseline tests fail (see $log/baseline.*.log): fix them first" >&2; exit 2; }
echo "baseline: built and passed in $((SECONDS - start)) s"

survived=()
for m in "${selected[@]}"; do
  IFS='|' read -r name file edits tests <<<"$m"
  start=$SECONDS
  cp "$src/$file" "$scratch/original"
  if ! python3 - "$src/$file" "$edits" <<'EOF'
import sys
path, edits = sys.argv[1], sys.argv[2]
text = open(path).read()
for edit in edits.split(" ;; "):
    old, new = edit.split("=>", 1)
    if text.count(old) != 1:
        sys.exit(f"'{old}' occurs {text.count(old)} times in {path}, not once")
    text = text.replace(old, new)
open(path, "w").write(text)
EOF
  then
    echo "ERROR    $name: the mutation no longer applies; update tools/mutate.sh" >&2
    exit 2
  fi
  outcome=KILLED
  # shellcheck disable=SC2086
  if ! cmake --build "$build" -j "$jobs" --target $(echo "$tests" | tr ' ' '\n' | sed 's/=.*//') \
    >"$log/$name.build.log" 2>&1; then
    outcome="ERROR (does not compile: $log/$name.build.log)"
  elif run_tests "$name" "$tests"; then
    outcome=SURVIVED
    survived+=("$name")
  fi
  # Restored with a new mtime: ninja then rebuilds what the mutant's build replaced.
  cp "$scratch/original" "$src/$file"
  printf '%-8s %-30s %s (%d s)\n' "${outcome%% *}" "$name" "$file" $((SECONDS - start))
  [[ "$outcome" == ERROR* ]] && { echo "$outcome" >&2; exit 2; }
done
# Leave the scratch build matching the unmutated tree.
# shellcheck disable=SC2086
cmake --build "$build" -j "$jobs" --target $targets >"$log/restore.build.log" 2>&1 || true

if [[ ${#survived[@]} -gt 0 ]]; then
  echo "SURVIVED: ${survived[*]} (no test failed with these bugs in place)"
  exit 1
fi
echo "all ${#selected[@]} mutations killed"
