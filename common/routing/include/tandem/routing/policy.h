#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tandem/routing/kv_index.h"
#include "tandem/routing/worker_state.h"

namespace tandem::routing {

struct RouteRequest {
  std::span<const BlockHash> block_hashes;  // the prompt's chained block hashes, in order
  std::int64_t prompt_tokens = 0;
  int block_size = 16;                      // tokens per block (the last block may be partial)
  std::uint64_t session_id = 0;             // 0: no session
  std::int64_t max_output_tokens = 0;       // 0: unknown
};

// What a policy sees: the KV index (event-fed) and every worker's state. Workers with role
// kPrefill or kCombined may take the prefill; kDecode workers the decode. Without decode workers
// the request runs where it was prefilled. workers[w] is slot w (WorkerTable::states() is).
struct ClusterView {
  const KvIndex* index = nullptr;
  std::span<const WorkerState> workers;
  double now_seconds = -1;  // same clock as WorkerTable's; < 0: unknown
};

struct RouteDecision {
  WorkerSlot prefill = kNoWorker;
  WorkerSlot decode = kNoWorker;  // kNoWorker: no decode pool, the prefill worker decodes
  std::int64_t predicted_cached_tokens = 0;  // what the caller should expect the prefill to skip
};

// A routing policy. Route() may update the policy's own state (round-robin position, approximate
// trees, sessions), so callers serialise calls; it never blocks and allocates nothing per call in
// the steady state. Unavailable when no worker can take the request.
class Policy {
 public:
  virtual ~Policy() = default;
  virtual absl::string_view name() const = 0;
  virtual absl::StatusOr<RouteDecision> Route(const RouteRequest& request,
                                              const ClusterView& view) = 0;
};

// SGLang model gateway `cache_aware`.
struct CacheAwareOptions {
  int balance_abs_threshold = 64;
  double balance_rel_threshold = 1.5;
  double cache_threshold = 0.3;
  std::size_t tree_max_blocks = std::size_t{1} << 20;  // its approximate tree, pruned LRU
};

// NVIDIA Dynamo KV router cost.
struct DynamoCostOptions {
  double overlap_weight = 1.0;
  TierCredits credits;
  std::uint64_t seed = 1;  // ties are broken at random, as Dynamo does
};

// Ours: joint prefill/decode choice from predicted TTFT and decode load.
struct TandemOptions {
  TierCredits credits;
  // Prior prefill speed until a worker has reported one.
  double prior_prefill_seconds_per_token = 1.0 / 8000;
  double prefill_overhead_seconds = 0.02;
  // Weight of this request's own prefill against the queue ahead of it (above 1: recomputing also
  // delays every later request on that worker).
  double own_work_weight = 1.0;
  double own_work_weight_per_queued = 0.0;  // added per request in flight per worker of the pool
  // A prompt's tokens cached on a worker count this many times their compute time in its favour.
  // Beyond this request's own saving (already in its predicted TTFT): a prompt moved off the
  // worker holding its prefix recomputes it there and leaves a duplicate, and every duplicate
  // takes room other prefixes would have hit in. High: prefixes move only when their worker is far
  // behind. This one for a prefix other prompts branch off (a system prompt, a document).
  double cache_stickiness = 20.0;
  // ... divided by how many recent requests ended their match at the same block (decayed with this
  // time constant; 0: never divided): a prefix many requests share is worth replicating on a less
  // loaded worker, a conversation's private history is not.
  double shared_prefix_seconds = 150.0;
  // ... and this many times instead for a prompt continuing one routed earlier (its cached match
  // ends at that prompt's last full block: a conversation's next turn, an agent's next step).
  // Lower than cache_stickiness: a history pinned to its worker cannot move with the load, and an
  // agent's steps a second apart pile up behind one worker (suite agentic-64 at x2); higher lets
  // conversations move often enough to lose hit rate (Mooncake at 5). docs/routing.md,
  // "Sensitivity".
  double history_stickiness = 14.0;
  // A copy of a branch point costs the pool twice: its compute, and the room it takes from other
  // prefixes. While some prefill worker is idle the compute delays nobody, so there
  // cache_stickiness is charged in proportion to the second cost only: the share of the pool's
  // evictions that are asked for again (prefix blocks routed before and now cached nowhere, over
  // blocks evicted; decayed over shared_prefix_seconds), in full from this share on. Where the
  // caches lose nothing that is asked for again (large caches) a popular prefix is copied to an
  // idle worker as soon as that is faster for the request; where they do (small caches, many
  // documents) it stays. 0: always in full. docs/routing.md, "Sensitivity".
  double full_stickiness_reused_share = 0.005;
  // ... but never under this share of it: whatever room the caches have, a copy is this
  // request's miss of the whole prefix. Without a floor the hit rate on 512-token-block traces
  // with many shared prompts sat at SGLang's less the criterion's slack (mix-512-bursty seeds 3
  // and 6 under it); 0: copies are free while the caches lose nothing. docs/routing.md, rule 4b
  // and point 23.
  double branch_stickiness_floor = 0.1;
  // While a copy of a branch point is free (some prefill worker idle, the caches losing nothing
  // asked for again: rule 4b), a request's predicted wait on a busy worker counts this many times
  // more (x how free the copy is), so a popular prefix is copied to an idle worker before the
  // waits for its holders add up at the tail. Each copy is one request's miss. 0: off.
  // docs/routing.md, "Where the losses came from", points 13-14 (sensitivity tables).
  double idle_wait_weight = 0.75;
  // ... scaled by min(1, (fan-out - offset) / idle_wait_fan_out) (0: unscaled): a copy is repaid
  // only by later requests sharing the prefix, so a prefix few recent requests ended at is not
  // copied ahead of its holder (unscaled, the charge traded p90 losses for hit-rate losses on the
  // held-out seeds). docs/routing.md, point 14.
  double idle_wait_fan_out = 2.0;
  double idle_wait_fan_out_offset = 1.0;
  // While some prefill worker is idle, a branch point's stickiness (never a history's) may not
  // put a request among the slowest first tokens: a worker whose predicted TTFT is over this
  // quantile of the recent decisions' (the chosen worker's predicted TTFT, the last
  // tail_guard_window decisions) by more than prefill_overhead_seconds is passed over while
  // some worker's is at or under the quantile. What the prefix is worth to later requests keeps
  // them fast, rarely at the tail; this request's wait puts it there. 0: off. docs/routing.md,
  // rule 4e and point 24.
  double tail_guard_quantile = 0.9;
  std::size_t tail_guard_window = 1024;  // decisions; the guard acts once a quarter are seen
  std::size_t max_seen_blocks = std::size_t{1} << 20;  // per generation of routed-block memory
  // What a prompt stored on a worker that is evicting costs: the blocks it pushes out are asked
  // for again at the pool's measured share (above), each a piece of someone's history lost, so
  // charged like moving a history: this many times the compute time of the prompt's uncached
  // tokens x that share. Keeps new prompts off full caches while other workers have room (a
  // shared system prompt no longer pins every new conversation to its first holders). 0: off;
  // needs full_stickiness_reused_share > 0 (the measurement). docs/routing.md, rule 4c.
  double displaced_history_stickiness = 14.0;
  // ... times this while some prefill worker is idle: at light load a prompt's compute elsewhere
  // delays nobody, while computing it on a holder of its shared prefix only risks histories the
  // cache may still keep; in full the charge spread new prompts over workers that must compute
  // their system prompts, and lost p90 to Dynamo at light load (mix-16). Chosen on the tune seeds
  // and seeds 3-6, never the held-out ones. docs/routing.md, rule 4c and point 18.
  double displaced_history_idle_scale = 0.25;
  std::size_t max_shared_prefixes = 1 << 16;
  // Blocks routed to a worker and not yet stored there count as held by it until the request's
  // predicted TTFT, while the worker has prefills in flight (the index learns them only when they
  // are stored): requests sharing a prefix that is still being computed follow it instead of
  // computing it again elsewhere.
  bool track_pending = true;
  std::size_t max_pending_blocks = std::size_t{1} << 18;
  int max_pending_blocks_per_request = 1024;
  // A session's previous worker wins while its predicted TTFT is this close to the best.
  double session_slack_seconds = 0.25;
  std::size_t max_sessions = 1 << 16;

  // Bounded imbalance: never pick a worker with this many more requests in flight than the least
  // loaded one of its pool; 0: no bound. Off by default: a request count is not work (a pool of
  // short prompts reaches 16 at no real imbalance), and under overload the bound forced
  // conversations off their KV, so the misses fed the overload (suite mix-16, 2,048 x2: hit .62
  // with it, .70 without). The predicted TTFT already carries each worker's queued work, and the
  // stickiness bounds how far behind a worker may fall for its cache.
  int max_in_flight_spread = 0;
  // Decode: predicted step time = base + per_sequence * batch + per_block * KV blocks.
  double decode_base_seconds = 0.010;
  double decode_per_sequence_seconds = 0.0003;
  double decode_per_block_seconds = 0.00001;
};

std::unique_ptr<Policy> MakeRoundRobinPolicy();
std::unique_ptr<Policy> MakeLeastLoadPolicy();
std::unique_ptr<Policy> MakePowerOfTwoPolicy(std::uint64_t seed = 1);
std::unique_ptr<Policy> MakeCacheAwarePolicy(CacheAwareOptions options = {});
std::unique_ptr<Policy> MakeDynamoCostPolicy(DynamoCostOptions options = {});
std::unique_ptr<Policy> MakeTandemPolicy(TandemOptions options = {});

// By name: round-robin, least-load, power-of-two, sglang-cache-aware, dynamo-cost, tandem.
// InvalidArgument naming the known policies otherwise.
absl::StatusOr<std::unique_ptr<Policy>> MakePolicy(absl::string_view name);
std::vector<std::string> PolicyNames();

}  // namespace tandem::routing
