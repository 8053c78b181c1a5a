#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "workers/prefix_router.h"
#include "workers/worker_registry.h"

namespace tandem::router {

// Where one generation runs: a combined worker, or a prefill worker handing KV to a decode worker.
struct WorkerPlan {
  std::unique_ptr<WorkerLease> combined;
  std::unique_ptr<WorkerLease> prefill;
  std::unique_ptr<WorkerLease> decode;
  // Prompt tokens the prefill (or combined) worker is expected to hold in its prefix cache, per
  // the router's index; 0 without one. Images wholly inside them need no encoder.
  std::int64_t predicted_cached_tokens = 0;

  bool disaggregated() const { return combined == nullptr; }
};

// Picks workers for a request. An interface so routing policies (prefix affinity) can replace the
// default without touching dispatch.
class WorkerSelector {
 public:
  virtual ~WorkerSelector() = default;
  // Unavailable when no healthy workers serve `model`.
  virtual absl::StatusOr<WorkerPlan> Select(const std::string& model,
                                            std::span<const std::int32_t> prompt) = 0;
  // The longest prompt + completion the workers a plan would be made of accept, without making
  // one (a request is validated on arrival but placed only when its turn comes). Unavailable
  // when no healthy workers serve `model`.
  virtual absl::StatusOr<int> MaxContext(const std::string& model) = 0;
  // Select for a request whose KV block chain starts from `kv_hash_root` (a cache salt, see
  // SamplingParams.kv_hash_root): prefix matches are looked up under that chain. Selectors
  // without a prefix index ignore it.
  virtual absl::StatusOr<WorkerPlan> SelectRooted(const std::string& model,
                                                  std::span<const std::int32_t> prompt,
                                                  std::uint64_t kv_hash_root) {
    return Select(model, prompt);
  }
};

// One salted request's view of a selector: Select is `inner`'s SelectRooted with the request's
// root. The API layer hands it to the request's dispatch in place of the shared selector.
class RootedSelector final : public WorkerSelector {
 public:
  RootedSelector(WorkerSelector* inner, std::uint64_t kv_hash_root)
      : inner_(inner), root_(kv_hash_root) {}
  absl::StatusOr<WorkerPlan> Select(const std::string& model,
                                    std::span<const std::int32_t> prompt) override {
    return inner_->SelectRooted(model, prompt, root_);
  }
  absl::StatusOr<int> MaxContext(const std::string& model) override {
    return inner_->MaxContext(model);
  }

 private:
  WorkerSelector* const inner_;
  const std::uint64_t root_;
};

// MaxContext over the healthy pool a plan is drawn from: prefill + decode when both have
// workers, else the combined workers.
absl::StatusOr<int> PoolMaxContext(WorkerRegistry* registry, const std::string& model);

// Prefers a prefill + decode pair, else a combined worker; within a role, the least loaded
// (router in-flight + reported running + waiting), ties to the lowest worker id. A pair is formed
// only of workers with the same kv_layout_id: the least loaded prefill that has such a decode,
// with the least loaded one of its generation if any, else of another generation.
class LeastLoadedSelector final : public WorkerSelector {
 public:
  explicit LeastLoadedSelector(WorkerRegistry* registry) : registry_(registry) {}
  absl::StatusOr<WorkerPlan> Select(const std::string& model,
                                    std::span<const std::int32_t> prompt) override;
  absl::StatusOr<int> MaxContext(const std::string& model) override {
    return PoolMaxContext(registry_, model);
  }

 private:
  WorkerRegistry* registry_;
};

// Routes with the configured policy (--routing-policy) over the KV prefix index: a prefill +
// decode pair when both pools have healthy workers, else a combined worker. Leases report
// dispatch, prefill completion (learnt prefill speed) and completion back to the PrefixRouter.
class PolicySelector final : public WorkerSelector {
 public:
  PolicySelector(WorkerRegistry* registry, PrefixRouter* router)
      : registry_(registry), router_(router) {}
  absl::StatusOr<WorkerPlan> Select(const std::string& model,
                                    std::span<const std::int32_t> prompt) override {
    return SelectRooted(model, prompt, 0);
  }
  absl::StatusOr<WorkerPlan> SelectRooted(const std::string& model,
                                          std::span<const std::int32_t> prompt,
                                          std::uint64_t kv_hash_root) override;
  absl::StatusOr<int> MaxContext(const std::string& model) override {
    return PoolMaxContext(registry_, model);
  }

 private:
  WorkerRegistry* registry_;
  PrefixRouter* router_;
};

}  // namespace tandem::router
