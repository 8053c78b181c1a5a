#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "tandem/routing/kv_index.h"
#include "tandem/routing/policy.h"
#include "tandem/routing/prefill_queue.h"
#include "tandem/routing/types.h"
#include "tandem/routing/worker_state.h"

namespace tandem::routing {

// Late binding for held prefills (docs/routing.md, rule 10). A prefill is placed when it arrives,
// but it may then wait in the hold queue behind its worker's running and held work. When another
// prefill worker falls idle, the held prefill whose first token the move brings soonest goes
// there, so long as the wait it skips is larger than `extra_compute_weight` times the compute the
// move adds (the idle worker lacks what the busy one has cached: a conversation's history, a
// shared document). The weight keeps moves to waits a recompute clearly pays for: each added
// token is a lost cache hit and takes room in the idle worker's cache.
struct HeldMoveOptions {
  bool enabled = true;
  double extra_compute_weight = 7.0;
  // Per prefill, as the tandem policy charges it, and the speed before a worker's is learnt.
  double prefill_overhead_seconds = TandemOptions{}.prefill_overhead_seconds;
  double prior_prefill_seconds_per_token = TandemOptions{}.prior_prefill_seconds_per_token;
};

struct HeldMove {
  PrefillQueue::Ticket ticket = 0;
  WorkerSlot from = kNoWorker;
  std::int64_t uncached_tokens = 0;  // what the idle worker computes for it
};

// What `idle` would compute of a held prefill, or < 0 when it cannot take it (another KV layout
// than the request's decode worker, for one).
using UncachedOnIdle = absl::FunctionRef<std::int64_t(PrefillQueue::Ticket)>;

// The held prefill `idle` should take over now, if any. `workers` is the worker table's states
// (speeds, when the running prefill started); the queue gives each worker's held prefills in
// release order and what is out on it.
std::optional<HeldMove> PickHeldMove(const PrefillQueue& queue, WorkerSlot idle,
                                     std::span<const WorkerState> workers, double now_seconds,
                                     const HeldMoveOptions& options,
                                     UncachedOnIdle uncached_on_idle);

// Carries `move` out: the dispatch's counts leave `move.from` (`withdrawn_uncached` and `blocks`,
// as dispatched there) for the idle worker, and the ticket moves in the queue, predicted at that
// worker's learnt speed (`prior` before one). True when it starts now.
bool ApplyHeldMove(const HeldMove& move, WorkerSlot idle, std::int64_t withdrawn_uncached,
                   std::int64_t blocks, double now_seconds, double prior_seconds_per_token,
                   WorkerTable* table, PrefillQueue* queue);

// What `worker` would compute of a prompt per the index: its tokens beyond the leading run of
// `chain` the index has there.
std::int64_t UncachedTokensOn(const KvIndex& index, std::span<const BlockHash> chain,
                              std::int64_t prompt_tokens, int block_size, WorkerSlot worker);

// Held moves belong to tandem's policy: the baselines, held or not, keep the worker they chose.
inline bool PolicyMovesHeld(absl::string_view policy_name) { return policy_name == "tandem"; }

}  // namespace tandem::routing
