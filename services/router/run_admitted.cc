#include "run_admitted.h"

namespace tandem::router {
namespace {

// Passes everything through and remembers whether anything reached the client's side.
class DeliveryWatch final : public TokenSink {
 public:
  explicit DeliveryWatch(TokenSink* inner) : inner_(inner) {}
  bool OnTokens(std::span<const std::int32_t> ids) override {
    delivered_ = true;
    return inner_->OnTokens(ids);
  }
  void OnPromptCached(std::uint32_t cached_prompt_tokens) override {
    inner_->OnPromptCached(cached_prompt_tokens);
  }
  bool delivered() const { return delivered_; }

 private:
  TokenSink* inner_;
  bool delivered_ = false;
};

}  // namespace

absl::StatusOr<GenerationOutcome> RunAdmitted(const RunDeps& deps, AdmissionTicket* ticket,
                                              const GenerationRequest& request,
                                              CallCanceller* canceller, TokenSink* sink) {
  if (absl::Status turn = ticket->AwaitTurn(request.deadline); !turn.ok()) return turn;
  DeliveryWatch watch(sink);
  for (;;) {
    absl::StatusOr<GenerationOutcome> outcome;
    {
      absl::StatusOr<WorkerPlan> plan = deps.selector->Select(deps.model, request.prompt_ids);
      if (!plan.ok()) return plan.status();
      outcome = deps.dispatcher->Run(request, *plan, canceller, &watch);
    }  // the plan's leases end here
    const bool capacity_refusal = !outcome.ok() &&
                                  outcome.status().code() == absl::StatusCode::kResourceExhausted &&
                                  !watch.delivered() && !canceller->cancelled();
    if (!capacity_refusal) return outcome;
    if (deps.metrics != nullptr) deps.metrics->worker_capacity_refusals->Increment();
    if (absl::Status again = ticket->Requeue(request.deadline); !again.ok()) return again;
  }
}

}  // namespace tandem::router
