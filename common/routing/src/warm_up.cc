#include "tandem/routing/warm_up.h"

#include <cmath>

#include "pools.h"

namespace tandem::routing {

std::optional<WarmUp> WarmUpPlanner::Plan(std::span<const BlockHash> chain, WorkerSlot chosen,
                                          const ClusterView& view, double now_seconds) {
  if (!options_.enabled || view.index == nullptr || chain.empty() || chosen < 0 ||
      chosen >= static_cast<WorkerSlot>(view.workers.size())) {
    return std::nullopt;
  }
  // Only requests that queue behind other work on their holder count.
  if (internal::Load(view.workers[chosen]) == 0) return std::nullopt;
  const internal::SlotList pool = internal::PrefillPool(view);
  MatchResult match;
  view.index->Match(chain, pool.mask | SlotBit(chosen), &match);
  const int run = match[chosen].blocks();
  if (run < options_.min_blocks) return std::nullopt;
  const BlockHash run_end = chain[run - 1];
  if (waits_.size() >= options_.max_tracked_runs && !waits_.contains(run_end)) waits_.clear();
  Waits& w = waits_[run_end];
  if (w.count > 0 && options_.waits_decay_seconds > 0) {
    w.count *= std::exp(-std::max(0.0, now_seconds - w.at_seconds) / options_.waits_decay_seconds);
  }
  w.at_seconds = now_seconds;
  w.count += 1;
  if (w.count < options_.min_waits || warming_.contains(run_end)) return std::nullopt;
  if (auto settling = settling_until_.find(run_end); settling != settling_until_.end()) {
    if (now_seconds < settling->second) return std::nullopt;
    settling_until_.erase(settling);
  }
  // The idle prefill-only worker holding the most of the run (the cheapest copy), lowest slot
  // first. A combined worker is left out: its prefill accounting lasts a whole generation.
  WarmUp best;
  for (WorkerSlot s : pool) {
    const WorkerState& state = view.workers[s];
    if (s == chosen || state.role != Role::kPrefill || internal::Load(state) > 0) continue;
    const int held = match[s].blocks();
    if (held >= run) continue;
    if (best.worker == kNoWorker || held > best.cached_blocks) {
      best = WarmUp{.worker = s, .blocks = run, .cached_blocks = held, .run_end = run_end};
    }
  }
  if (best.worker == kNoWorker) return std::nullopt;
  warming_.insert(run_end);
  ++planned_;
  return best;
}

void WarmUpPlanner::Done(BlockHash run_end, double now_seconds) {
  if (warming_.erase(run_end) == 0) return;
  if (settling_until_.size() >= options_.max_tracked_runs) settling_until_.clear();
  settling_until_[run_end] = now_seconds + options_.settle_seconds;
}

}  // namespace tandem::routing
