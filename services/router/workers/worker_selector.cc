#include "workers/worker_selector.h"

#include <algorithm>
#include <limits>
#include <utility>

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

// Prefill first: the least loaded prefill worker that has a decode of its KV layout, with the
// least loaded such decode of its own generation, else of any generation. Null when no prefill and
// decode share a layout.
std::pair<const WorkerView*, const WorkerView*> LeastLoadedPair(
    const std::vector<WorkerView>& prefill, const std::vector<WorkerView>& decode) {
  std::vector<const WorkerView*> order;
  for (const WorkerView& v : prefill) order.push_back(&v);
  std::stable_sort(order.begin(), order.end(),
                   [](const WorkerView* a, const WorkerView* b) { return a->load < b->load; });
  for (const WorkerView* p : order) {
    const WorkerView* same = nullptr;
    const WorkerView* any = nullptr;
    for (const WorkerView& d : decode) {
      if (!KvCompatible(p->entry->info(), d.entry->info())) continue;
      if (any == nullptr || d.load < any->load) any = &d;
      if (SameGeneration(p->entry->info(), d.entry->info()) &&
          (same == nullptr || d.load < same->load)) {
        same = &d;
      }
    }
    if (any != nullptr) return {p, same != nullptr ? same : any};
  }
  return {nullptr, nullptr};
}

// The start gate of a prefill in the hold queue (held, or one whose prompt may go in pieces): its
// turn (possibly moved to another prefill worker meanwhile), then a last look at both workers,
// which may have started draining (or gone) while it waited. Such a request is placed again
// (ABORTED: nothing was delivered, the dispatch loop re-selects as for a lost worker) rather than
// sent to a draining worker. With pieces (rule 11; `prompt` non-empty), each turn may send the
// prompt's next piece instead, after which the rest waits for its turn again.
async::Task<absl::StatusOr<WorkerLease::Started>> PrefillStartGate(
    PrefixRouter* router, WorkerRegistry* registry, int ticket,
    std::shared_ptr<WorkerEntry> prefill, std::shared_ptr<WorkerEntry> decode,
    std::vector<std::int32_t> prompt, std::uint64_t kv_hash_root, async::Executor* executor,
    CallCanceller* canceller, std::chrono::system_clock::time_point deadline) {
  WorkerLease::Started started;
  for (;;) {
    absl::StatusOr<std::optional<WorkerLease::Moved>> turn =
        co_await router->PrefillTurn(ticket, executor, canceller, deadline);
    if (!turn.ok()) co_return turn.status();
    if (turn->has_value()) {
      started.moved = std::move(**turn);
      started.own_piece_tokens = 0;  // its pieces so far are cached where it was
    }
    const std::shared_ptr<WorkerEntry>& prefill_now =
        started.moved.has_value() ? started.moved->to : prefill;
    for (const WorkerEntry* worker : {prefill_now.get(), decode.get()}) {
      if (worker != nullptr && !registry->Placeable(*worker)) {
        co_return absl::AbortedError(absl::StrCat(
            "worker ", worker->id(), " started draining or left while the prefill was held"));
      }
    }
    if (prompt.empty()) break;
    absl::StatusOr<std::optional<std::int64_t>> piece = co_await router->RunPrefillPiece(
        ticket, prompt, kv_hash_root, prefill_now, executor, canceller, deadline);
    if (!piece.ok()) co_return piece.status();
    if (!piece->has_value()) break;
    started.own_piece_tokens += **piece;
  }
  co_return started;
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
    const auto [p, d] = LeastLoadedPair(prefill, decode);
    if (p != nullptr) {
      plan.prefill = registry_->Acquire(p->entry);
      plan.decode = registry_->Acquire(d->entry);
      return plan;
    }
  }
  const auto combined = registry_->Healthy(model, v1::WORKER_ROLE_COMBINED);
  if (!combined.empty()) {
    plan.combined = registry_->Acquire(LeastLoaded(combined)->entry);
    return plan;
  }
  if (!prefill.empty() && !decode.empty()) {
    return absl::UnavailableError(absl::StrCat(
        "no prefill and decode worker serving ", model,
        " share a kv_layout_id (KV format): no pair can be formed (", prefill.size(),
        " prefill, ", decode.size(), " decode)"));
  }
  return NoWorkersError(model, prefill.size(), decode.size());
}

absl::StatusOr<WorkerPlan> PolicySelector::SelectRooted(const std::string& model,
                                                        std::span<const std::int32_t> prompt,
                                                        std::uint64_t kv_hash_root) {
  PrefixRouter::Candidates candidates;
  candidates.prefill = registry_->Healthy(model, v1::WORKER_ROLE_PREFILL);
  candidates.decode = registry_->Healthy(model, v1::WORKER_ROLE_DECODE);
  if (candidates.prefill.empty() || candidates.decode.empty()) {
    const std::size_t prefill = candidates.prefill.size(), decode = candidates.decode.size();
    candidates.prefill = registry_->Healthy(model, v1::WORKER_ROLE_COMBINED);
    candidates.decode.clear();
    if (candidates.prefill.empty()) return NoWorkersError(model, prefill, decode);
  }
  absl::StatusOr<PrefixRouter::Choice> choice = router_->Choose(prompt, candidates, 0, kv_hash_root);
  if (!choice.ok()) return choice.status();
  router_->SendWarmUp(*choice, prompt, kv_hash_root);

  WorkerPlan plan;
  plan.predicted_cached_tokens = choice->predicted_cached_tokens;
  PrefixRouter* router = router_;
  std::unique_ptr<WorkerLease> first = registry_->Acquire(choice->prefill);
  first->SetPrefillHook([router, ticket = choice->prefill_ticket](const v1::PrefillResponse* r) {
    router->PrefillFinished(ticket, r);
  });
  if (choice->decode == nullptr) {
    plan.combined = std::move(first);
    return plan;
  }
  if (choice->held || choice->may_cut) {
    std::vector<std::int32_t> pieces_of;
    if (choice->may_cut) pieces_of.assign(prompt.begin(), prompt.end());
    first->SetStartGate([router, registry = registry_, ticket = choice->prefill_ticket,
                         prefill = choice->prefill, decode = choice->decode,
                         prompt = std::move(pieces_of),
                         kv_hash_root](async::Executor* executor, CallCanceller* canceller,
                                       std::chrono::system_clock::time_point deadline) {
      return PrefillStartGate(router, registry, ticket, prefill, decode, prompt, kv_hash_root,
                              executor, canceller, deadline);
    });
  }
  plan.prefill = std::move(first);
  plan.decode = registry_->Acquire(choice->decode);
  plan.decode->SetReleaseHook(
      [router, ticket = choice->decode_ticket] { router->DecodeFinished(ticket); });
  return plan;
}

}  // namespace tandem::router
