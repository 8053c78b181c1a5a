#include "dispatch/run_admitted.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "async/event.h"

namespace tandem::router {
namespace {

// Passes everything through and keeps what reached the client's side: a migrated generation
// resumes after exactly these tokens.
class DeliveryWatch final : public TokenSink {
 public:
  explicit DeliveryWatch(TokenSink* inner) : inner_(inner) {}
  bool OnTokens(std::span<const std::int32_t> ids) override {
    delivered_.insert(delivered_.end(), ids.begin(), ids.end());
    return inner_->OnTokens(ids);
  }
  async::Task<bool> Flush() override { co_return co_await inner_->Flush(); }
  void OnPromptCached(std::uint32_t cached_prompt_tokens) override {
    // A migrated attempt's cache hits are not the request's: the first attempt's count stands.
    if (!reported_cached_) inner_->OnPromptCached(cached_prompt_tokens);
    reported_cached_ = true;
  }
  const std::vector<std::int32_t>& delivered() const { return delivered_; }

 private:
  TokenSink* inner_;
  std::vector<std::int32_t> delivered_;
  bool reported_cached_ = false;
};

// A worker failure the generation can survive elsewhere: the worker went away (its calls failed
// or its lease ran out) or dropped the generation while shutting down.
bool WorkerLost(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kAborted;
}

// A migration finds no worker when the only survivor is the lost one coming back (a restart
// re-registers within a heartbeat or two) or routing has not taken a worker in yet: it waits
// this long for one, looking again this often.
constexpr std::chrono::milliseconds kMigrationWaitForWorkers{1000};
constexpr std::chrono::milliseconds kMigrationWorkerPoll{50};
// Each refusal excludes its worker, so this only bounds a fleet that drains as a whole.
constexpr int kMaxDrainRefusals = 16;

void Count(metrics::Counter* counter, double by = 1) {
  if (counter != nullptr) counter->Increment(by);
}

}  // namespace

async::Task<absl::StatusOr<GenerationOutcome>> RunAdmitted(const RunDeps& deps,
                                                           AdmissionTicket* ticket,
                                                           const GenerationRequest& request,
                                                           CallCanceller* canceller,
                                                           TokenSink* sink) {
  if (absl::Status turn = co_await ticket->Turn(request.deadline); !turn.ok()) co_return turn;
  const RouterMetrics* m = deps.metrics;
  DeliveryWatch watch(sink);
  GenerationRequest attempt = request;
  int migrations = 0;
  int drain_refusals = 0;
  for (;;) {
    const std::size_t delivered_before = watch.delivered().size();
    absl::StatusOr<GenerationOutcome> outcome;
    {
      // A worker that fails cancels this attempt only; the client leaving cancels both.
      CallCanceller attempt_canceller;
      CallCanceller::Follow follow(canceller, &attempt_canceller);
      absl::StatusOr<WorkerPlan> plan = deps.selector->Select(deps.model, attempt.prompt_ids);
      const auto wait_until = std::chrono::steady_clock::now() + kMigrationWaitForWorkers;
      while ((migrations > 0 || drain_refusals > 0) && !plan.ok() &&
             plan.status().code() == absl::StatusCode::kUnavailable &&
             std::chrono::steady_clock::now() < wait_until && !canceller->cancelled() &&
             std::chrono::system_clock::now() < request.deadline) {
        co_await async::Sleep(deps.executor, kMigrationWorkerPoll);
        plan = deps.selector->Select(deps.model, attempt.prompt_ids);
      }
      if (!plan.ok()) co_return plan.status();
      outcome = co_await deps.dispatcher->Run(attempt, *plan, &attempt_canceller, &watch);
    }  // the plan's leases end here
    if (canceller->cancelled()) co_return canceller->reason();
    const std::size_t resumed = watch.delivered().size();
    if (outcome.ok()) {
      if (attempt.resumed_tokens > 0) {
        // The workers saw the delivered tokens as prompt; the client's usage counts them as output.
        outcome->usage.set_prompt_tokens(static_cast<std::uint32_t>(request.prompt_ids.size()));
        outcome->usage.set_completion_tokens(outcome->usage.completion_tokens() +
                                             attempt.resumed_tokens);
        outcome->usage.set_cached_prompt_tokens(
            std::min<std::uint32_t>(outcome->usage.cached_prompt_tokens(),
                                    static_cast<std::uint32_t>(request.prompt_ids.size())));
      }
      co_return outcome;
    }
    const bool delivered_now = watch.delivered().size() > delivered_before;
    if (outcome.status().code() == absl::StatusCode::kResourceExhausted && !delivered_now) {
      // Refused for capacity before this attempt produced anything: wait for a place, same plan.
      Count(m != nullptr ? m->worker_capacity_refusals : nullptr);
      if (absl::Status again = co_await ticket->Requeue(request.deadline); !again.ok()) {
        co_return again;
      }
      continue;
    }
    if (IsDrainRefusal(outcome.status()) && !delivered_now) {
      // A worker began draining before we heard: nothing was computed; place the request again
      // (that worker is now excluded). Bounded in case every worker drains at once.
      Count(m != nullptr ? m->drain_refusals : nullptr);
      if (++drain_refusals > kMaxDrainRefusals) co_return outcome;
      continue;
    }
    const bool rows_needed = IsImageRowsNeeded(outcome.status()) && !attempt.encode_every_image;
    if (rows_needed) Count(m != nullptr ? m->image_rows_retries : nullptr);
    if (rows_needed && !delivered_now) {
      // The worker's cache did not hold an image the router skipped encoding; nothing was
      // produced: the same request again, every image encoded this time, under a new id so that
      // the Cancel still on its way to the failed attempt's workers cannot reach it.
      attempt.encode_every_image = true;
      attempt.request_id = absl::StrCat(attempt.request_id, "~i");
      continue;
    }
    // Past tokens already delivered (a decode that lost an image's KV to preemption has no rows
    // to recompute it with), the request migrates as for a lost worker, with every image encoded.
    if (!WorkerLost(outcome.status()) && !rows_needed) co_return outcome;
    if (migrations >= deps.max_migrations) {
      Count(m != nullptr ? m->migration_failures : nullptr);
      co_return absl::UnavailableError(absl::StrCat(
          "the generation was lost ", migrations + 1, " times (--max-migrations ",
          deps.max_migrations, "); last: ", outcome.status().message()));
    }
    const std::uint32_t max_tokens = request.sampling.max_tokens();
    if (resumed >= max_tokens) {
      // Every token was delivered; only the end of the stream was lost.
      GenerationOutcome done;
      done.finish_reason = v1::FINISH_REASON_LENGTH;
      done.usage.set_prompt_tokens(static_cast<std::uint32_t>(request.prompt_ids.size()));
      done.usage.set_completion_tokens(max_tokens);
      co_return done;
    }
    // Resume on other workers: prompt + what the client already has, continued from there. A new
    // id keeps the retry apart from whatever the lost worker may still hold under the old one.
    ++migrations;
    Count(m != nullptr ? m->migrations : nullptr);
    Count(m != nullptr ? m->migrated_tokens : nullptr, static_cast<double>(resumed));
    attempt = request;
    attempt.request_id = absl::StrCat(request.request_id, "~m", migrations);
    attempt.prompt_ids.insert(attempt.prompt_ids.end(), watch.delivered().begin(),
                              watch.delivered().end());
    attempt.resumed_tokens = static_cast<std::uint32_t>(resumed);
    attempt.encode_every_image = rows_needed;
  }
}

}  // namespace tandem::router
