#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "tandem/routing/policy.h"

namespace tandem::routing {

struct WarmUpOptions {
  bool enabled = true;
  // A cached run shorter than this is cheap to recompute wherever its requests go.
  int min_blocks = 2;
  // Requests that waited for a busy holder of the same run (decayed, below) before it is copied:
  // a run one or two requests wait on is not worth a copy's miss.
  double min_waits = 4;
  double waits_decay_seconds = 150;
  // After a warm-up ends, its run is not copied again for this long: the worker's KV events (the
  // index's news of the copy) reach the router a little after its answer does.
  double settle_seconds = 1.0;
  std::size_t max_tracked_runs = std::size_t{1} << 16;
};

// A prompt prefix to compute on an idle prefill worker, alone (no request, no decode), so that
// later requests for it find a second holder.
struct WarmUp {
  WorkerSlot worker = kNoWorker;
  int blocks = 0;         // the leading blocks of the routed request's chain
  int cached_blocks = 0;  // of those, what the index says the worker holds already
  BlockHash run_end = 0;  // hand back to Done() when the warm-up ends, however it ends
};

// Rule 9 of docs/routing.md: copies of hot prefixes made off every request's critical path.
// Where requests keep queueing on the one worker that holds their shared prefix (a tenant's long
// system prompt at light load), waiting each time is cheaper for the request than recomputing the
// prefix elsewhere, so no per-request rule copies it, and the waits add up at the tail. When
// enough requests have waited on a run's holder and a prefill worker is idle, that worker
// computes the run on its own: nobody waits for it, and the next requests have two holders.
//
// Not thread-safe: called under the router's decision lock, after the policy routed a request.
class WarmUpPlanner {
 public:
  explicit WarmUpPlanner(WarmUpOptions options) : options_(options) {}

  // `chain` was just routed to prefill worker `chosen`; `view` is the cluster before that
  // dispatch is counted (so whether the request waits there is whether `chosen` had work). At
  // most one warm-up per run at a time.
  std::optional<WarmUp> Plan(std::span<const BlockHash> chain, WorkerSlot chosen,
                             const ClusterView& view, double now_seconds);
  // The warm-up of `run_end` ended (done, failed or abandoned): the run may be copied again once
  // settled.
  void Done(BlockHash run_end, double now_seconds);

  std::int64_t planned() const { return planned_; }

 private:
  struct Waits {
    double count = 0;
    double at_seconds = 0;
  };
  WarmUpOptions options_;
  absl::flat_hash_map<BlockHash, Waits> waits_;
  absl::flat_hash_set<BlockHash> warming_;
  absl::flat_hash_map<BlockHash, double> settling_until_;
  std::int64_t planned_ = 0;
};

// Warm-ups belong to tandem's policy: the baselines are replayed as their systems behave.
inline bool PolicyWarmsUp(absl::string_view policy_name) { return policy_name == "tandem"; }

}  // namespace tandem::routing
