#include "workers/worker_selector.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace tandem::router {
namespace {

const WorkerView* LeastLoaded(const std::vector<WorkerView>& candidates) {
  const WorkerView* best = nullptr;
  for (const WorkerView& v : candidates) {
    if (best == nullptr || v.load < best->load) best = &v;
  }
  return best;
}

absl::Status NoWorkersError(const std::string& model, std::size_t prefill, std::size_t decode) {
  return absl::UnavailableError(absl::StrCat("no healthy workers serve ", model, " (", prefill,
                                             " prefill, ", decode, " decode, 0 combined)"));
}

}  // namespace

absl::StatusOr<int> PoolMaxContext(WorkerRegistry* registry, const std::string& model) {
  std::vector<WorkerView> pool = registry->Healthy(model, v1::WORKER_ROLE_PREFILL);
  std::vector<WorkerView> decode = registry->Healthy(model, v1::WORKER_ROLE_DECODE);
  if (!pool.empty() && !decode.empty()) {
    pool.insert(pool.end(), decode.begin(), decode.end());
  } else {
    const std::size_t prefill_count = pool.size();
    pool = registry->Healthy(model, v1::WORKER_ROLE_COMBINED);
    if (pool.empty()) return NoWorkersError(model, prefill_count, decode.size());
  }
  int limit = std::numeric_limits<int>::max();
  for (const WorkerView& view : pool) {
    const int worker_limit = static_cast<int>(view.entry->info().max_context());
    if (worker_limit > 0) limit = std::min(limit, worker_limit);  // 0: the worker did not say
  }
  return limit;
}

absl::StatusOr<WorkerPlan> LeastLoadedSelector::Select(const std::string& model,
                                                       std::span<const std::int32_t>) {
  WorkerPlan plan;
  const auto prefill = registry_->Healthy(model, v1::WORKER_ROLE_PREFILL);
  const auto decode = registry_->Healthy(model, v1::WORKER_ROLE_DECODE);
  if (!prefill.empty() && !decode.empty()) {
    plan.prefill = registry_->Acquire(LeastLoaded(prefill)->entry);
    plan.decode = registry_->Acquire(LeastLoaded(decode)->entry);
    return plan;
  }
  const auto combined = registry_->Healthy(model, v1::WORKER_ROLE_COMBINED);
  if (!combined.empty()) {
    plan.combined = registry_->Acquire(LeastLoaded(combined)->entry);
    return plan;
  }
  return NoWorkersError(model, prefill.size(), decode.size());
}

absl::StatusOr<WorkerPlan> PolicySelector::Select(const std::string& model,
                                                  std::span<const std::int32_t> prompt) {
  PrefixRouter::Candidates candidates;
  candidates.prefill = registry_->Healthy(model, v1::WORKER_ROLE_PREFILL);
  candidates.decode = registry_->Healthy(model, v1::WORKER_ROLE_DECODE);
  if (candidates.prefill.empty() || candidates.decode.empty()) {
    const std::size_t prefill = candidates.prefill.size(), decode = candidates.decode.size();
    candidates.prefill = registry_->Healthy(model, v1::WORKER_ROLE_COMBINED);
    candidates.decode.clear();
    if (candidates.prefill.empty()) return NoWorkersError(model, prefill, decode);
  }
  absl::StatusOr<PrefixRouter::Choice> choice = router_->Choose(prompt, candidates);
  if (!choice.ok()) return choice.status();

  WorkerPlan plan;
  PrefixRouter* router = router_;
  std::unique_ptr<WorkerLease> first = registry_->Acquire(choice->prefill);
  first->SetPrefillHook([router, ticket = choice->prefill_ticket](const v1::PrefillResponse* r) {
    router->PrefillFinished(ticket, r);
  });
  if (choice->decode == nullptr) {
    plan.combined = std::move(first);
    return plan;
  }
  if (choice->held) {
    first->SetStartGate([router, ticket = choice->prefill_ticket](
                            async::Executor* executor, CallCanceller* canceller,
                            std::chrono::system_clock::time_point deadline) {
      return router->PrefillTurn(ticket, executor, canceller, deadline);
    });
  }
  plan.prefill = std::move(first);
  plan.decode = registry_->Acquire(choice->decode);
  plan.decode->SetReleaseHook(
      [router, ticket = choice->decode_ticket] { router->DecodeFinished(ticket); });
  return plan;
}

}  // namespace tandem::router
