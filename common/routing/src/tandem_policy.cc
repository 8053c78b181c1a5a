// Ours: prefill where the request's first token is predicted soonest, from the worker's queued
// prefill work plus this prompt's uncached tokens at the worker's learnt speed, less a multiple of
// what the worker already holds of the prompt (keeps conversations where their KV is; a shared
// prefix is copied where a copy displaces nothing asked for again), plus what storing the prompt
// on a full cache would push out that is asked for again; while a worker is idle, a shared prefix
// never keeps a request among the slowest recent first tokens. A session sticks to its previous
// worker while that costs little. Decode where the predicted step time is lowest among workers
// with KV room for the whole request. docs/routing.md, "Policies".
#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "pending_prefixes.h"
#include "pools.h"
#include "tandem/routing/policy.h"
#include "tandem/routing/recent_quantile.h"

namespace tandem::routing {
namespace {

using internal::SlotList;

class TandemPolicy final : public Policy {
 public:
  explicit TandemPolicy(TandemOptions options)
      : options_(options),
        unmeasured_seconds_per_token_(options.prior_prefill_seconds_per_token),
        pending_(options.max_pending_blocks, options.max_pending_blocks_per_request),
        recent_ttft_(options.tail_guard_window) {}

  absl::string_view name() const override { return "tandem"; }

  absl::StatusOr<RouteDecision> Route(const RouteRequest& request,
                                      const ClusterView& view) override {
    const SlotList prefill = internal::PrefillPool(view);
    if (prefill.empty()) return internal::NoWorkerError("prefill");
    internal::MatchPool(view, request, prefill, &match_);
    RouteDecision d;
    d.prefill = ChoosePrefill(request, view, prefill);
    d.predicted_cached_tokens = cached_[d.prefill];
    if (options_.tail_guard_quantile > 0) recent_ttft_.Add(ttft_[d.prefill]);
    if (options_.track_pending && view.now_seconds >= 0) {
      // Its blocks are on their way to that worker: there by the predicted first token.
      pending_.Add(request.block_hashes, run_[d.prefill], d.prefill, view.now_seconds,
                   view.now_seconds + ttft_[d.prefill]);
    }
    d.decode = ChooseDecode(request, view, internal::DecodePool(view));
    NoteReuse(request, prefill);
    NotePromptEnd(request);
    if (request.session_id != 0) {
      if (sessions_.size() >= options_.max_sessions) sessions_.clear();  // cheap bound
      sessions_[request.session_id] = d.prefill;
    }
    return d;
  }

 private:
  // The most requests in flight a worker may have to be picked (max_in_flight_spread > 0).
  int InFlightCap(const ClusterView& view, const SlotList& pool) const {
    if (options_.max_in_flight_spread <= 0) return std::numeric_limits<int>::max();
    return MinInFlight(view, pool) + options_.max_in_flight_spread;
  }

  static int MinInFlight(const ClusterView& view, const SlotList& pool) {
    int min_in_flight = internal::Load(view.workers[pool.slots[0]]);
    for (WorkerSlot w : pool) min_in_flight = std::min(min_in_flight, internal::Load(view.workers[w]));
    return min_in_flight;
  }

  double SecondsPerToken(const WorkerState& s) const {
    return s.PrefillSecondsPerToken(unmeasured_seconds_per_token_);
  }

  // What a worker that has not finished a prefill yet is assumed to take per token: the prior, or
  // the fastest measured worker of its pool where that is faster. Optimistic, so that it is tried
  // and measured: with a prior the measured workers beat (a small model on fast cores) unmeasured
  // workers would look slow, never be picked and never be measured, and the pool would shrink to
  // the first workers used (docs/routing.md, rule 1).
  void SetUnmeasuredSpeed(const ClusterView& view, const SlotList& pool) {
    unmeasured_seconds_per_token_ = options_.prior_prefill_seconds_per_token;
    for (WorkerSlot w : pool) {
      const double measured = view.workers[w].prefill_seconds_per_token;
      if (measured > 0) {
        unmeasured_seconds_per_token_ = std::min(unmeasured_seconds_per_token_, measured);
      }
    }
  }

  double PredictTtft(const RouteRequest& request, const WorkerState& s, std::int64_t cached,
                     double own_weight, double now_seconds) const {
    const double uncached = static_cast<double>(request.prompt_tokens - cached);
    // The policy's own fixed part per prefill, not the one the worker's fit learnt
    // (WorkerState::prefill_fit): on the real CPU cluster, where a prefill takes milliseconds,
    // charging the learnt one cost multiturn 3 points of hit rate against Dynamo's
    // (docs/routing.md, point 20); in the simulator the two are equal.
    const double own = options_.prefill_overhead_seconds + uncached * SecondsPerToken(s);
    return PredictWait(s, now_seconds) + own_weight * own;
  }

  // The queue ahead of a new prefill on s, less what the running one has already had.
  double PredictWait(const WorkerState& s, double now_seconds) const {
    double queued_seconds = static_cast<double>(s.queued_prefill_tokens) * SecondsPerToken(s);
    if (now_seconds >= 0 && s.prefill_head_started_seconds >= 0) {
      queued_seconds = std::max(0.0, queued_seconds - (now_seconds - s.prefill_head_started_seconds));
    }
    return internal::Load(s) * options_.prefill_overhead_seconds + queued_seconds;
  }

  // How many times the cached part's compute time a worker's cache is worth beyond this request's
  // own saving. A match ending where an earlier routed prompt ended continues that prompt (a
  // conversation's next turn, an agent's next step, found through pending blocks too: the step may
  // come before the previous one is stored): moved, it recomputes the whole history and leaves the
  // old copy dead, so history_stickiness. A match ending anywhere else is a branch point (a
  // tenant's prompt, a document, an agent's tools) whose copies all serve later requests:
  // cache_stickiness. Either is divided by the prefix's fan-out.
  double Stickiness(const RouteRequest& request, const ClusterView& view, const SlotList& pool) {
    const double fan_out = SharedPrefixFanOut(request, view, pool);
    fan_out_ = fan_out;
    int run = 0;
    for (WorkerSlot w : pool) run = std::max(run, static_cast<int>(run_[w]));
    // Erased once continued: a prompt is continued once; a block many prompts end at (a tenant's
    // prompt followed by questions that end in its last block) is a branch point from then on.
    const bool continues = run > 0 && run <= static_cast<int>(request.block_hashes.size()) &&
                           prompt_ends_.erase(request.block_hashes[run - 1]) > 0;
    branch_scale_ = 1;
    continues_ = continues;
    if (continues) return options_.history_stickiness / fan_out;
    branch_scale_ = BranchStickinessScale();
    return options_.cache_stickiness * branch_scale_ / fan_out;
  }

  // 1 while no prefill worker is idle (a copy's compute would delay others) or while at least
  // full_stickiness_reused_share of the pool's evictions are asked for again; below that share, in
  // proportion to it (a copy displaces little that anyone asks for again), never under
  // branch_stickiness_floor (a copy is still a miss).
  double BranchStickinessScale() const {
    if (!(options_.full_stickiness_reused_share > 0)) return 1;
    if (!pool_idle_) return 1;
    return std::max(options_.branch_stickiness_floor,
                    std::min(1.0, reused_share_ / options_.full_stickiness_reused_share));
  }

  // Rule 4e: the highest predicted TTFT a branch point's stickiness may choose (infinite: no
  // bound): the recent tail plus the policy's fixed part per prefill, a difference its
  // predictions do not resolve (on the real CPU cluster, where prefills take milliseconds, the
  // tail without it was a millisecond's noise and cost a point of hit rate). Only while some
  // prefill worker is idle: under load a copy's compute delays the requests queued behind it,
  // and pushing a history off its worker is never cheap. A request whose best predicted TTFT is
  // over the tail already is left to the score.
  double TailBound(double best_ttft) const {
    if (!(options_.tail_guard_quantile > 0) || continues_ || !pool_idle_) return INFINITY;
    if (recent_ttft_.size() < std::max<std::size_t>(1, recent_ttft_.window() / 4)) return INFINITY;
    const double tail = recent_ttft_.Quantile(options_.tail_guard_quantile);
    return best_ttft <= tail ? tail + options_.prefill_overhead_seconds : INFINITY;
  }

  // Lost over evicted blocks, decayed (0 before any eviction). A block lost must have been
  // evicted; more "lost" than evicted is a pending prefill that outlived its prediction.
  // Reads the counts Decay brought to now.
  double ReusedShare() const {
    if (!(evicted_blocks_ > 0)) return 0;
    return std::min(lost_blocks_, evicted_blocks_) / evicted_blocks_;
  }

  // Brings the decayed counts of lost and evicted blocks (pool and per worker) to now, evictions
  // from the index's per-worker counts.
  void Decay(const ClusterView& view, const SlotList& pool) {
    const double now = std::max(0.0, view.now_seconds);
    if (options_.shared_prefix_seconds > 0) {
      const double f = std::exp(-std::max(0.0, now - reuse_seen_) / options_.shared_prefix_seconds);
      lost_blocks_ *= f;
      evicted_blocks_ *= f;
      for (WorkerSlot w : pool) evicted_recent_[w] *= f;
    }
    reuse_seen_ = now;
    if (view.index == nullptr) return;
    for (WorkerSlot w : pool) {
      const std::int64_t evicted = view.index->evicted_blocks(w);
      // Lower than last time: the worker was removed and added again, counting from 0.
      const std::int64_t before = evicted >= evicted_seen_[w] ? evicted_seen_[w] : 0;
      evicted_blocks_ += static_cast<double>(evicted - before);
      evicted_recent_[w] += static_cast<double>(evicted - before);
      evicted_seen_[w] = evicted;
    }
  }

  // The leading blocks of `chain` in routed-block memory. Whole prefixes are remembered, so the
  // memory is prefix-closed and a binary search finds the run.
  std::size_t SeenRun(std::span<const BlockHash> chain, bool current_only) const {
    auto seen = [&](BlockHash h) {
      return seen_.contains(h) || (!current_only && seen_old_.contains(h));
    };
    std::size_t lo = 0, hi = chain.size();  // chain[0, lo) seen; chain[hi, end) not
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      if (seen(chain[mid])) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  // Counts this prompt's blocks routed before and now cached nowhere (in the index or on their
  // way: evicted before they were asked for again) and remembers its full blocks.
  void NoteReuse(const RouteRequest& request, const SlotList& pool) {
    if (!(options_.full_stickiness_reused_share > 0) || request.block_size <= 0) return;
    const std::span<const BlockHash> full = request.block_hashes.first(std::min<std::size_t>(
        request.block_hashes.size(),
        static_cast<std::size_t>(std::max<std::int64_t>(0, request.prompt_tokens) /
                                 request.block_size)));
    const std::size_t seen_run = SeenRun(full, /*current_only=*/false);
    std::size_t held_run = 0;
    for (WorkerSlot w : pool) held_run = std::max(held_run, run_[w]);
    // The counts were brought to now by this decision's ReusedShare (ChoosePrefill).
    if (seen_run > held_run) lost_blocks_ += static_cast<double>(seen_run - held_run);
    for (std::size_t i = SeenRun(full, /*current_only=*/true); i < full.size(); ++i) {
      if (seen_.size() >= options_.max_seen_blocks) {  // two generations: drop the older
        seen_old_ = std::move(seen_);
        seen_.clear();
      }
      seen_.insert(full[i]);
    }
  }

  // How many recent requests ended their longest indexed match at the same block as this one
  // (decayed over shared_prefix_seconds), at least 1. A conversation's history is the match end
  // of its next turn only (1: full stickiness); a tenant's system prompt is the match end of every
  // question to it, so the more popular, the more worth replicating it on a less loaded worker is
  // than queueing behind the one worker that has it.
  double SharedPrefixFanOut(const RouteRequest& request, const ClusterView& view,
                            const SlotList& pool) {
    if (!(options_.shared_prefix_seconds > 0)) return 1;
    int run = 0;
    for (WorkerSlot w : pool) run = std::max(run, match_[w].blocks());
    if (run <= 0 || run > static_cast<int>(request.block_hashes.size())) return 1;
    if (shared_.size() >= options_.max_shared_prefixes) shared_.clear();  // cheap bound
    SharedPrefix& prefix = shared_[request.block_hashes[run - 1]];
    const double now = std::max(0.0, view.now_seconds);
    prefix.count *= std::exp(-std::max(0.0, now - prefix.seen) / options_.shared_prefix_seconds);
    prefix.seen = now;
    const double fan_out = std::max(1.0, prefix.count);
    prefix.count += 1;
    return fan_out;
  }

  // Remembers where this prompt ends (its last full block: a partial one is never matched).
  void NotePromptEnd(const RouteRequest& request) {
    if (request.block_size <= 0) return;
    const std::int64_t last_full = request.prompt_tokens / request.block_size - 1;
    if (last_full < 0 || last_full >= static_cast<std::int64_t>(request.block_hashes.size())) return;
    if (prompt_ends_.size() >= options_.max_shared_prefixes) prompt_ends_.clear();  // cheap bound
    prompt_ends_.insert(request.block_hashes[last_full]);
  }

  WorkerSlot ChoosePrefill(const RouteRequest& request, const ClusterView& view,
                           const SlotList& pool) {
    SetUnmeasuredSpeed(view, pool);
    // Once per decision: rule 4b's scale, rule 4c's charge and the tie-break read the counts.
    Decay(view, pool);
    reused_share_ = options_.full_stickiness_reused_share > 0 ? ReusedShare() : 0;
    const int in_flight_cap = InFlightCap(view, pool);
    // Recomputing what is cached elsewhere also delays the requests that will queue behind this
    // one: the busier the pool, the more a hit is worth against a shorter queue.
    double in_flight_sum = 0;
    pool_idle_ = false;
    for (WorkerSlot w : pool) {
      in_flight_sum += internal::Load(view.workers[w]);
      pool_idle_ = pool_idle_ || view.workers[w].in_flight == 0;
    }
    const double own_weight =
        options_.own_work_weight + options_.own_work_weight_per_queued * in_flight_sum / pool.size;
    std::array<double, kMaxWorkers>& ttft = ttft_;
    std::array<std::int64_t, kMaxWorkers>& cached = cached_;
    double best_ttft = INFINITY;
    for (WorkerSlot w : pool) {
      const WorkerState& s = view.workers[w];
      cached[w] = internal::CoveredTokens(match_[w].Credit(options_.credits), request);
      // Blocks on their way to this worker (routed there, not stored yet) count as held: the
      // request would queue behind the one computing them.
      run_[w] = static_cast<std::size_t>(match_[w].blocks());
      // Only while the worker has prefills in flight: once they are done, what they stored is in
      // the index (or was lost), and nothing is on its way.
      if (options_.track_pending && view.now_seconds >= 0 && s.in_flight > 0) {
        const std::size_t ext = pending_.Extend(request.block_hashes, run_[w], w, view.now_seconds);
        if (ext > run_[w]) {
          cached[w] = std::max(cached[w],
                               internal::CoveredTokens(static_cast<double>(ext), request));
          run_[w] = ext;
        }
      }
      ttft[w] = internal::Load(s) > in_flight_cap
                    ? INFINITY
                    : PredictTtft(request, s, cached[w], own_weight, view.now_seconds);
      best_ttft = std::min(best_ttft, ttft[w]);
    }
    if (request.session_id != 0) {
      auto it = sessions_.find(request.session_id);
      if (it != sessions_.end() && (pool.mask & SlotBit(it->second)) != 0 &&
          ttft[it->second] <= best_ttft + options_.session_slack_seconds) {  // small: unscaled
        return it->second;
      }
    }
    const double stickiness = Stickiness(request, view, pool);
    double displaced_share = options_.displaced_history_stickiness > 0 ? reused_share_ : 0;
    if (pool_idle_) displaced_share *= options_.displaced_history_idle_scale;
    // docs/routing.md, "Where the losses came from", points 13-14: while a copy of a
    // branch point is free (rule 4b's scale under 1), waiting for a busy holder is charged beyond
    // the wait itself, so popular prefixes are copied to idle workers before the waits add up.
    double wait_charge = options_.idle_wait_weight * (1 - branch_scale_);
    if (options_.idle_wait_fan_out > 0) {
      wait_charge *= std::min(1.0, std::max(0.0, fan_out_ - options_.idle_wait_fan_out_offset) /
                                       options_.idle_wait_fan_out);
    }
    const double ttft_bound = TailBound(best_ttft);
    // Score: predicted TTFT less the worth of what the worker already holds of this prompt.
    WorkerSlot best = kNoWorker;
    double best_score = INFINITY;
    for (WorkerSlot w : pool) {
      if (ttft[w] == INFINITY || ttft[w] > ttft_bound) continue;
      const double cached_seconds =
          static_cast<double>(cached[w]) * SecondsPerToken(view.workers[w]);
      double score = ttft[w] - stickiness * cached_seconds;
      if (displaced_share > 0 && evicted_recent_[w] >= 1) {  // w is evicting: its cache is full
        score += options_.displaced_history_stickiness * displaced_share *
                 static_cast<double>(request.prompt_tokens - cached[w]) *
                 SecondsPerToken(view.workers[w]);
      }
      if (wait_charge > 0 && view.workers[w].in_flight > 0) {
        score += wait_charge * PredictWait(view.workers[w], view.now_seconds);
      }
      // Equal scores (a prompt nothing is cached for, on idle workers at the same speed) go to
      // the worker that evicted least lately: by slot order alone the first workers took every
      // such prompt and evicted others' histories while the last ones' caches sat unused.
      if (best == kNoWorker || score < best_score ||
          (score == best_score && evicted_recent_[w] < evicted_recent_[best])) {
        best = w;
        best_score = score;
      }
    }
    return best;
  }

  WorkerSlot ChooseDecode(const RouteRequest& request, const ClusterView& view,
                          const SlotList& pool) const {
    if (pool.empty()) return kNoWorker;
    const std::int64_t need = internal::BlocksOf(
        request.prompt_tokens + std::max<std::int64_t>(request.max_output_tokens, 0),
        request.block_size);
    const int in_flight_cap = InFlightCap(view, pool);
    WorkerSlot best = kNoWorker;
    bool best_fits = false;
    double best_step = 0;
    for (WorkerSlot w : pool) {
      const WorkerState& s = view.workers[w];
      if (internal::Load(s) > in_flight_cap) continue;
      // Unknown capacity (no report yet) counts as room.
      const bool fits = s.total_kv_blocks <= 0 || s.total_kv_blocks - s.active_blocks >= need;
      const double step = options_.decode_base_seconds +
                          options_.decode_per_sequence_seconds * (internal::Load(s) + 1) +
                          options_.decode_per_block_seconds *
                              static_cast<double>(s.active_blocks + need);
      if (best == kNoWorker || (fits && !best_fits) || (fits == best_fits && step < best_step)) {
        best = w;
        best_fits = fits;
        best_step = step;
      }
    }
    return best;
  }

  TandemOptions options_;
  double unmeasured_seconds_per_token_ = 0;  // set per decision (SetUnmeasuredSpeed)
  double fan_out_ = 1;  // set per decision (Stickiness): SharedPrefixFanOut's count
  double branch_scale_ = 1;  // set per decision (Stickiness): rule 4b's scale, 1 for a history
  bool continues_ = false;   // set per decision (Stickiness): the match continues a routed prompt
  double reused_share_ = 0;  // set per decision (ChoosePrefill): ReusedShare, rules 4b and 4c
  // Set per decision (ChoosePrefill): some prefill worker has nothing in flight, so work placed
  // there delays no one (rules 4b and 4c).
  bool pool_idle_ = false;
  internal::PendingPrefixes pending_;
  RecentQuantile recent_ttft_;  // the chosen worker's predicted TTFT per decision (rule 4e)
  MatchResult match_;
  // Per worker, for the decision being made: predicted TTFT, cached tokens and cached run in
  // blocks (index and pending).
  std::array<double, kMaxWorkers> ttft_{};
  std::array<std::int64_t, kMaxWorkers> cached_{};
  std::array<std::size_t, kMaxWorkers> run_{};
  absl::flat_hash_map<std::uint64_t, WorkerSlot> sessions_;
  struct SharedPrefix {
    double count = 0;  // decayed number of requests whose match ended here
    double seen = 0;   // when count was last decayed (view clock)
  };
  absl::flat_hash_map<BlockHash, SharedPrefix> shared_;
  absl::flat_hash_set<BlockHash> prompt_ends_;  // last full block of each routed prompt
  // Full blocks of routed prompts (two generations: the older is dropped when the newer fills).
  absl::flat_hash_set<BlockHash> seen_, seen_old_;
  // Decayed counts: prefix blocks asked for again and cached nowhere, blocks evicted (as of
  // reuse_seen_); each prefill worker's eviction count last read from the index.
  double lost_blocks_ = 0, evicted_blocks_ = 0, reuse_seen_ = 0;
  std::array<std::int64_t, kMaxWorkers> evicted_seen_{};
  std::array<double, kMaxWorkers> evicted_recent_{};  // decayed, per prefill worker
};

}  // namespace

std::unique_ptr<Policy> MakeTandemPolicy(TandemOptions options) {
  return std::make_unique<TandemPolicy>(options);
}

}  // namespace tandem::routing
