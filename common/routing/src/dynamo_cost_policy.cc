// NVIDIA Dynamo KV router: cost = overlap_weight x blocks still to prefill + active blocks, lowest
// wins, ties at random; cached blocks are credited by tier (device 1.0, host 0.75, disk lower).
#include <random>

#include "pools.h"
#include "tandem/routing/policy.h"

namespace tandem::routing {
namespace {

using internal::SlotList;

class DynamoCostPolicy final : public Policy {
 public:
  explicit DynamoCostPolicy(DynamoCostOptions options) : options_(options), rng_(options.seed) {}

  absl::string_view name() const override { return "dynamo-cost"; }

  absl::StatusOr<RouteDecision> Route(const RouteRequest& request,
                                      const ClusterView& view) override {
    const SlotList prefill = internal::PrefillPool(view);
    if (prefill.empty()) return internal::NoWorkerError("prefill");
    internal::MatchPool(view, request, prefill, &match_);
    const double request_blocks = static_cast<double>(request.block_hashes.size());
    RouteDecision d;
    d.prefill = ArgMin(prefill, [&](WorkerSlot w) {
      const double to_prefill = std::max(0.0, request_blocks - match_[w].Credit(options_.credits));
      return options_.overlap_weight * to_prefill + static_cast<double>(view.workers[w].active_blocks);
    });
    // Decode gets its KV from prefill: no overlap term, only the active blocks.
    d.decode = ArgMin(internal::DecodePool(view), [&](WorkerSlot w) {
      return static_cast<double>(view.workers[w].active_blocks);
    });
    d.predicted_cached_tokens =
        internal::CoveredTokens(match_[d.prefill].Credit(options_.credits), request);
    return d;
  }

 private:
  template <typename CostFn>
  WorkerSlot ArgMin(const SlotList& pool, CostFn cost) {
    WorkerSlot best = kNoWorker;
    double best_cost = 0;
    int ties = 0;
    for (WorkerSlot w : pool) {
      const double c = cost(w);
      if (best == kNoWorker || c < best_cost) {
        best = w;
        best_cost = c;
        ties = 1;
      } else if (c == best_cost) {
        // Reservoir sampling: each tied worker ends up chosen with equal probability.
        ++ties;
        if (std::uniform_int_distribution<int>(0, ties - 1)(rng_) == 0) best = w;
      }
    }
    return best;
  }

  DynamoCostOptions options_;
  std::mt19937_64 rng_;
  MatchResult match_;
};

}  // namespace

std::unique_ptr<Policy> MakeDynamoCostPolicy(DynamoCostOptions options) {
  return std::make_unique<DynamoCostPolicy>(options);
}

}  // namespace tandem::routing
