#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "tandem/routing/prefill_speed.h"
#include "tandem/routing/types.h"

namespace tandem::routing {

// What the router knows about one worker when it decides. Router-tracked fields change on
// dispatch/finish (exact and immediate); reported fields come with heartbeats (late by up to one
// interval); learnt fields are estimates from finished work.
struct WorkerState {
  WorkerSlot slot = kNoWorker;
  Role role = Role::kCombined;
  bool available = false;  // registered and healthy

  // Router-tracked.
  int in_flight = 0;                       // requests dispatched here and not finished
  std::int64_t queued_prefill_tokens = 0;  // predicted uncached prompt tokens not yet prefilled
  std::int64_t active_blocks = 0;          // KV blocks of the requests in flight here
  // When the prefill now running started (caller's clock, seconds), < 0 when idle or unknown:
  // lets a policy subtract the part of the queued work already done.
  double prefill_head_started_seconds = -1;

  // Reported by the worker.
  int running = 0;
  int waiting = 0;
  std::int64_t total_kv_blocks = 0;
  std::int64_t free_kv_blocks = 0;

  // Learnt online (EWMA); 0 = no sample yet, the policy's prior applies. The prefill speed is the
  // per-token part of a fit that takes a fixed part per prefill out (PrefillSpeedFit).
  double prefill_seconds_per_token = 0;
  PrefillSpeedFit prefill_fit;     // its fixed part is learnt too; the tandem policy uses its own
  double decode_step_seconds = 0;  // recent decode step durations

  // The learnt prefill speed, or `prior` before the first sample.
  double PrefillSecondsPerToken(double prior) const {
    return prefill_seconds_per_token > 0 ? prefill_seconds_per_token : prior;
  }
};

// Holds every worker's state and applies dispatch/finish/report updates. The router owns one and
// hands `states()` to the policy; not thread-safe (same lock as the index).
class WorkerTable {
 public:
  struct Options {
    double ewma_alpha = 0.2;  // weight of the newest sample in learnt speeds
  };
  explicit WorkerTable(Options options) : options_(options) {}
  WorkerTable() : WorkerTable(Options{}) {}

  absl::Status Add(WorkerSlot w, Role role);
  absl::Status SetAvailable(WorkerSlot w, bool available);
  absl::Status Report(WorkerSlot w, int running, int waiting, std::int64_t total_kv_blocks,
                      std::int64_t free_kv_blocks);

  // A request's prefill went to w, expected to compute `uncached_tokens` and hold `blocks`.
  // `now_seconds` (any monotonic clock, < 0: none) dates the start of work on an idle worker.
  void OnPrefillDispatched(WorkerSlot w, std::int64_t uncached_tokens, std::int64_t blocks,
                           double now_seconds = -1);
  // Same arguments as at dispatch, plus what the worker measured (0 seconds: no speed sample).
  void OnPrefillFinished(WorkerSlot w, std::int64_t uncached_tokens, std::int64_t blocks,
                         std::int64_t computed_tokens, double compute_seconds,
                         double now_seconds = -1);
  // A prefill dispatched to w and not started there (held in the router) went elsewhere: the
  // dispatch's counts are taken back, the running prefill's start is kept.
  void OnPrefillWithdrawn(WorkerSlot w, std::int64_t uncached_tokens, std::int64_t blocks);
  void OnDecodeDispatched(WorkerSlot w, std::int64_t blocks);
  void OnDecodeFinished(WorkerSlot w, std::int64_t blocks);
  // One decode step of `batch` sequences took `seconds`.
  void OnDecodeStep(WorkerSlot w, int batch, double seconds);

  std::span<const WorkerState> states() const { return states_; }
  const WorkerState* Find(WorkerSlot w) const;

 private:
  WorkerState* Mutable(WorkerSlot w);
  double Ewma(double old_value, double sample) const;

  Options options_;
  std::vector<WorkerState> states_;  // indexed by slot; unused slots have slot == kNoWorker
};

}  // namespace tandem::routing
