// SGLang model gateway `cache_aware`: balance first when the load spread is large in both absolute
// and relative terms; otherwise the longest prefix match in the policy's own approximate tree
// (what it routed where, not what the workers report), if the match covers enough of the prompt.
#include "pools.h"
#include "tandem/routing/policy.h"

namespace tandem::routing {
namespace {

using internal::SlotList;

class CacheAwarePolicy final : public Policy {
 public:
  explicit CacheAwarePolicy(CacheAwareOptions options)
      : options_(options), tree_(KvIndex::Options{.max_blocks = options.tree_max_blocks}) {}

  absl::string_view name() const override { return "sglang-cache-aware"; }

  absl::StatusOr<RouteDecision> Route(const RouteRequest& request,
                                      const ClusterView& view) override {
    const SlotList prefill = internal::PrefillPool(view);
    if (prefill.empty()) return internal::NoWorkerError("prefill");
    for (WorkerSlot w : prefill) {
      if ((tree_.known_workers() & SlotBit(w)) == 0) {
        if (absl::Status s = tree_.AddWorker(w, 0); !s.ok()) return s;
      }
    }
    RouteDecision d;
    d.prefill = ChoosePrefill(request, view, prefill);
    // Every routed request extends the chosen worker's branch of the tree, balanced or not.
    tree_.Store(d.prefill, Tier::kDevice, request.block_hashes);
    tree_.Touch(request.block_hashes);
    d.decode = internal::LeastInFlight(view, internal::DecodePool(view));
    d.predicted_cached_tokens = internal::PredictedCachedTokens(view, request, d.prefill);
    return d;
  }

 private:
  WorkerSlot ChoosePrefill(const RouteRequest& request, const ClusterView& view,
                           const SlotList& pool) {
    int max_load = 0;
    int min_load = 0;
    bool first = true;
    for (WorkerSlot w : pool) {
      const int load = view.workers[w].in_flight;
      max_load = first ? load : std::max(max_load, load);
      min_load = first ? load : std::min(min_load, load);
      first = false;
    }
    const bool imbalanced = (max_load - min_load) > options_.balance_abs_threshold &&
                            max_load > options_.balance_rel_threshold * min_load;
    const WorkerSlot least = internal::LeastInFlight(view, pool);
    if (imbalanced || request.prompt_tokens <= 0) return least;

    tree_.Match(request.block_hashes, pool.mask, &match_);
    WorkerSlot best = kNoWorker;
    for (WorkerSlot w : pool) {
      if (best == kNoWorker || match_[w].blocks() > match_[best].blocks()) best = w;
    }
    const double ratio = static_cast<double>(internal::CoveredTokens(match_[best].blocks(), request)) /
                         static_cast<double>(request.prompt_tokens);
    return ratio > options_.cache_threshold ? best : least;
  }

  CacheAwareOptions options_;
  KvIndex tree_;
  MatchResult match_;
};

}  // namespace

std::unique_ptr<Policy> MakeCacheAwarePolicy(CacheAwareOptions options) {
  return std::make_unique<CacheAwarePolicy>(options);
}

}  // namespace tandem::routing
