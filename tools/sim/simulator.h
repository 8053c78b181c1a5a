#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tandem/routing/held_moves.h"
#include "tandem/routing/policy.h"
#include "tandem/routing/prefill_pieces.h"
#include "tandem/routing/warm_up.h"
#include "trace.h"

namespace tandem::sim {

// The simulated cluster. Prefill workers run one prompt at a time, FIFO, costing
// overhead + uncached tokens x seconds per token, and keep prompt KV in an LRU cache of
// `capacity_blocks`; a hit is the leading run of the prompt's blocks still cached when its prefill
// starts. The KV then moves to the decode worker (per-block transfer time); the first token is out
// when it lands. Decode workers batch continuously: a step costs base + per sequence x batch +
// per block x KV blocks held, and a request is admitted only when its prompt + output blocks fit.
// One request's prefill as the simulation saw it (for finding where a policy loses).
struct RequestRecord {
  double arrival = 0;
  std::int64_t prompt_tokens = 0;
  std::int64_t computed_tokens = 0;  // what its worker did not have cached
  double wait = 0;                   // arrival to the start of its prefill (router + worker queue)
  double ttft = 0;
  int prefill_worker = -1;
  // At arrival, by the workers' caches: the blocks of the prompt's leading run the chosen worker
  // held, and the most any prefill worker held (hits given up by the choice, or lost later).
  std::int64_t chosen_cached_blocks = 0;
  std::int64_t best_cached_blocks = 0;
};

struct SimConfig {
  int prefill_workers = 8;
  int decode_workers = 8;
  std::int64_t capacity_blocks = 2048;        // prefix cache per prefill worker
  std::int64_t decode_capacity_blocks = 0;    // per decode worker; 0: same as capacity_blocks
  int block_size = 512;
  double speedup = 1.0;                       // arrival times are divided by this
  double prefill_overhead_seconds = 0.02;
  double prefill_seconds_per_token = 1.0 / 8000;
  // Per prefill worker multipliers of the per-token cost (empty: all 1): a mixed fleet.
  std::vector<double> prefill_slowdown;
  double kv_transfer_seconds_per_block = 0.0005;
  double decode_base_seconds = 0.010;
  double decode_per_sequence_seconds = 0.0003;
  double decode_per_block_seconds = 0.00001;
  // The router's prefill hold queue (routing::PrefillQueue), for the policies that use it
  // (routing::PolicyHoldsPrefills): prefills out per worker (0: none held) and aging.
  int prefill_hold_depth = 1;
  double prefill_hold_aging = 0.1;
  // The same hold queue in front of every policy, the baselines too: separates what a placement
  // wins from what the queue wins (the baselines' published systems dispatch at once).
  bool hold_every_policy = false;
  // Tandem's warm-ups of hot prefixes on idle prefill workers (routing::WarmUpPlanner); the
  // baselines never warm up.
  routing::WarmUpOptions warm_up;
  // Tandem's late binding: a prefill worker falling idle takes over a held prefill of a busy one
  // (routing::PickHeldMove); the baselines keep their choice.
  routing::HeldMoveOptions held_moves;
  // Tandem's prefills in pieces (routing::NextPiece, rule 11): a long prompt's leading part
  // runs as a prefill of its own and the rest is held again, so shorter held prefills may pass
  // it. piece_seconds 0: whole prompts.
  routing::PrefillPieceOptions pieces;
  // When set, one record per request is appended here, in prefill completion order.
  std::vector<RequestRecord>* per_request = nullptr;
};

struct SimResult {
  std::string policy;
  bool held = false;  // its prefills went through the hold queue
  std::int64_t requests = 0;
  double hit_rate = 0;        // cached prompt tokens / prompt tokens
  double hit_rate_bound = 0;  // the same with one infinite cache
  // p90 TTFT no router can beat: every request computing only what one infinite cache would miss,
  // on the fastest worker, without waiting.
  double ttft_p90_floor = 0;
  // p90 TTFT of one infinite cache shared by all workers behind one central FIFO queue.
  double ttft_p90_oracle = 0;
  double ttft_p50 = 0, ttft_p90 = 0, ttft_p99 = 0;
  double itl_p50 = 0, itl_p99 = 0;
  // max / mean requests in flight over a pool's workers, sampled at each arrival (worst pool).
  double imbalance_max = 0, imbalance_mean = 0;
  double simulated_seconds = 0;  // last completion
  std::int64_t index_gaps = 0;   // KV events the index did not apply in order (should be 0)
  std::int64_t warm_ups = 0;     // prefixes computed alone on idle workers (tandem only)
  std::int64_t warm_up_tokens = 0;  // what they computed (not in hit_rate's prompt tokens)
  std::int64_t held_moves = 0;      // held prefills taken over by idle workers (tandem only)
  std::int64_t prefill_pieces = 0;  // leading pieces computed before their rests (tandem only)
};

// InvalidArgument for an impossible cluster; errors from the policy stop the run.
absl::StatusOr<SimResult> Simulate(const Trace& trace, const SimConfig& config,
                                   routing::Policy& policy);

// One line of JSON; the keys tandem-sim documents.
std::string ToJson(const SimResult& result);

}  // namespace tandem::sim
