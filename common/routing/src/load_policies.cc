// Cache-blind baselines: round-robin, least-load, power-of-two. Each picks within a pool by load
// alone, the same rule for the prefill and the decode pool.
#include <random>

#include "pools.h"
#include "tandem/routing/policy.h"

namespace tandem::routing {
namespace {

using internal::SlotList;

enum class PoolKind { kPrefill = 0, kDecode = 1 };

class PerPoolPolicy : public Policy {
 public:
  absl::StatusOr<RouteDecision> Route(const RouteRequest& request,
                                      const ClusterView& view) final {
    const SlotList prefill = internal::PrefillPool(view);
    if (prefill.empty()) return internal::NoWorkerError("prefill");
    RouteDecision d;
    d.prefill = Pick(view, prefill, PoolKind::kPrefill);
    const SlotList decode = internal::DecodePool(view);
    if (!decode.empty()) d.decode = Pick(view, decode, PoolKind::kDecode);
    d.predicted_cached_tokens = internal::PredictedCachedTokens(view, request, d.prefill);
    return d;
  }

 protected:
  // `pool` is never empty.
  virtual WorkerSlot Pick(const ClusterView& view, const SlotList& pool, PoolKind kind) = 0;
};

class RoundRobinPolicy final : public PerPoolPolicy {
 public:
  absl::string_view name() const override { return "round-robin"; }

 private:
  WorkerSlot Pick(const ClusterView&, const SlotList& pool, PoolKind kind) override {
    std::uint64_t& next = next_[static_cast<int>(kind)];
    return pool.slots[next++ % pool.size];
  }
  std::uint64_t next_[2] = {0, 0};
};

class LeastLoadPolicy final : public PerPoolPolicy {
 public:
  absl::string_view name() const override { return "least-load"; }

 private:
  WorkerSlot Pick(const ClusterView& view, const SlotList& pool, PoolKind) override {
    return internal::LeastInFlight(view, pool);
  }
};

// Two distinct random workers; the one with fewer requests in flight (the first on a tie).
class PowerOfTwoPolicy final : public PerPoolPolicy {
 public:
  explicit PowerOfTwoPolicy(std::uint64_t seed) : rng_(seed) {}
  absl::string_view name() const override { return "power-of-two"; }

 private:
  WorkerSlot Pick(const ClusterView& view, const SlotList& pool, PoolKind) override {
    if (pool.size == 1) return pool.slots[0];
    std::uniform_int_distribution<int> first_dist(0, pool.size - 1);
    std::uniform_int_distribution<int> second_dist(0, pool.size - 2);
    const int i = first_dist(rng_);
    int j = second_dist(rng_);
    if (j >= i) ++j;
    const WorkerSlot a = pool.slots[i];
    const WorkerSlot b = pool.slots[j];
    return view.workers[b].in_flight < view.workers[a].in_flight ? b : a;
  }

  std::mt19937_64 rng_;
};

}  // namespace

std::unique_ptr<Policy> MakeRoundRobinPolicy() { return std::make_unique<RoundRobinPolicy>(); }
std::unique_ptr<Policy> MakeLeastLoadPolicy() { return std::make_unique<LeastLoadPolicy>(); }
std::unique_ptr<Policy> MakePowerOfTwoPolicy(std::uint64_t seed) {
  return std::make_unique<PowerOfTwoPolicy>(seed);
}

}  // namespace tandem::routing
