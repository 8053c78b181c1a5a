#include "tandem/routing/held_moves.h"

#include <algorithm>

namespace tandem::routing {

std::optional<HeldMove> PickHeldMove(const PrefillQueue& queue, WorkerSlot idle,
                                     std::span<const WorkerState> workers, double now_seconds,
                                     const HeldMoveOptions& options,
                                     UncachedOnIdle uncached_on_idle) {
  if (!options.enabled || queue.total_held() == 0 || idle < 0 ||
      idle >= static_cast<WorkerSlot>(workers.size())) {
    return std::nullopt;
  }
  const double overhead = options.prefill_overhead_seconds;
  const double idle_speed =
      workers[idle].PrefillSecondsPerToken(options.prior_prefill_seconds_per_token);
  std::optional<HeldMove> best;
  double best_gain = 0;
  for (const WorkerState& busy : workers) {
    const WorkerSlot from = busy.slot;
    if (from == kNoWorker || from == idle || queue.held(from) == 0) continue;
    const double speed = busy.PrefillSecondsPerToken(options.prior_prefill_seconds_per_token);
    // Until the first held one starts: what is out there, less what it has had.
    double ahead = queue.out(from) * overhead + static_cast<double>(queue.out_tokens(from)) * speed;
    if (now_seconds >= 0 && busy.prefill_head_started_seconds >= 0) {
      ahead = std::max(0.0, ahead - (now_seconds - busy.prefill_head_started_seconds));
    }
    for (PrefillQueue::Ticket ticket : queue.HeldFor(from)) {
      const double there = overhead + static_cast<double>(queue.tokens(ticket)) * speed;
      const std::int64_t uncached = uncached_on_idle(ticket);
      if (uncached >= 0) {
        const double here = overhead + static_cast<double>(uncached) * idle_speed;
        // The wait skipped, less the weighted compute added (a negative addition, where the idle
        // worker holds more of the prompt, counts as a gain too).
        const double gain = ahead - options.extra_compute_weight * (here - there);
        if (gain > best_gain) {
          best_gain = gain;
          best = HeldMove{.ticket = ticket, .from = from, .uncached_tokens = uncached};
        }
      }
      ahead += there;
    }
  }
  return best;
}

bool ApplyHeldMove(const HeldMove& move, WorkerSlot idle, std::int64_t withdrawn_uncached,
                   std::int64_t blocks, double now_seconds, double prior_seconds_per_token,
                   WorkerTable* table, PrefillQueue* queue) {
  table->OnPrefillWithdrawn(move.from, withdrawn_uncached, blocks);
  table->OnPrefillDispatched(idle, move.uncached_tokens, blocks, now_seconds);
  const double predicted = static_cast<double>(move.uncached_tokens) *
                           table->states()[idle].PrefillSecondsPerToken(prior_seconds_per_token);
  return queue->Move(move.ticket, idle, predicted, move.uncached_tokens);
}

std::int64_t UncachedTokensOn(const KvIndex& index, std::span<const BlockHash> chain,
                              std::int64_t prompt_tokens, int block_size, WorkerSlot worker) {
  MatchResult match;
  index.Match(chain, SlotBit(worker), &match);
  const std::int64_t cached = std::min<std::int64_t>(
      prompt_tokens, static_cast<std::int64_t>(match[worker].blocks()) * block_size);
  return prompt_tokens - cached;
}

}  // namespace tandem::routing
