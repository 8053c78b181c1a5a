#include "dispatch/dispatcher.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "dispatch/worker_calls.h"
#include "tandem/rpc/conversions.h"

namespace tandem::router {
namespace {

constexpr char kDrainRefusalPayload[] = "tandem.dev/worker-draining";
constexpr char kImageRowsNeededPayload[] = "tandem.dev/image-rows-needed";

using SystemClock = std::chrono::system_clock;

std::uint64_t UnixMs(SystemClock::time_point t) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count());
}

// The fields every worker call of a generation carries alike.
template <typename Call>
void FillCommon(const GenerationRequest& request, Call* call) {
  *call->mutable_version() = rpc::CurrentVersion();
  call->set_request_id(request.request_id);
  call->mutable_prompt_token_ids()->Add(request.prompt_ids.begin(), request.prompt_ids.end());
  *call->mutable_sampling() = request.sampling;
  call->set_deadline_unix_ms(UnixMs(request.deadline));
  call->set_traffic_class(request.traffic_class);
  call->set_resumed_tokens(request.resumed_tokens);
}

}  // namespace

// What one generation has streamed so far.
struct Dispatcher::StreamState {
  TokenSink* sink = nullptr;
  WorkerLease* prefill_lease = nullptr;  // told when the prefill answers (routing learns speeds)
  bool stopped_by_sink = false;
  std::uint32_t tokens_seen = 0;
  // Combined workers compute the prompt themselves and say how much of it was cached with their
  // first tokens; a decode worker's count is not the prompt's (the prefill's answer is).
  bool cached_from_stream = false;

  // Forwards `ids` unless the sink already stopped, and completes once they went out to the
  // client; false once the sink has stopped (the output ended, or the client is gone and its
  // canceller stops the rest).
  async::Task<bool> Deliver(std::span<const std::int32_t> ids) {
    if (stopped_by_sink) co_return false;
    tokens_seen += static_cast<std::uint32_t>(ids.size());
    if (!sink->OnTokens(ids)) {
      stopped_by_sink = true;
      co_return false;
    }
    const bool flushed = co_await sink->Flush();
    if (!flushed) stopped_by_sink = true;
    co_return flushed;
  }
};

Dispatcher::Dispatcher(WorkerRegistry* registry, Options options)
    : registry_(registry), options_(std::move(options)) {}

async::Task<absl::StatusOr<GenerationOutcome>> Dispatcher::Run(const GenerationRequest& request,
                                                               WorkerPlan& plan,
                                                               CallCanceller* canceller,
                                                               TokenSink* sink) {
  StreamState state{.sink = sink, .prefill_lease = plan.prefill.get()};
  absl::StatusOr<GenerationOutcome> outcome;
  std::vector<const WorkerEntry*> involved;
  if (plan.disaggregated()) {
    plan.prefill->Watch(canceller);
    plan.decode->Watch(canceller);
    outcome = co_await RunDisaggregated(request, plan.decode->worker(),
                                        plan.predicted_cached_tokens, canceller, &state);
    // After the run: a held prefill may have moved to another worker at its start.
    involved = {&plan.prefill->worker(), &plan.decode->worker()};
  } else {
    plan.combined->Watch(canceller);
    involved = {&plan.combined->worker()};
    outcome = co_await RunCombined(request, plan.combined->worker(), plan.predicted_cached_tokens,
                                   canceller, &state);
  }
  if (canceller->cancelled()) {
    // The client left or a worker went down mid-request: free whatever the others still hold.
    for (const WorkerEntry* worker : involved) registry_->Cancel(*worker, request.request_id);
    co_return canceller->reason();
  }
  co_return outcome;
}

async::Task<absl::StatusOr<GenerationOutcome>> Dispatcher::RunCombined(
    const GenerationRequest& request, const WorkerEntry& worker, std::int64_t cached_tokens,
    CallCanceller* canceller, StreamState* state) {
  v1::GenerateRequest call;
  FillCommon(request, &call);
  if (!request.images.empty()) {
    absl::StatusOr<std::vector<v1::PromptImage>> images =
        co_await EncodeImages(request, worker.info().model(), cached_tokens, canceller);
    if (!images.ok()) co_return images.status();
    for (v1::PromptImage& image : *images) *call.add_images() = std::move(image);
  }
  call.set_first_token_id(-1);
  state->cached_from_stream = true;
  co_return co_await StreamGenerate(worker, call, request, canceller, state);
}

async::Task<absl::StatusOr<GenerationOutcome>> Dispatcher::RunDisaggregated(
    const GenerationRequest& request, const WorkerEntry& decode, std::int64_t cached_tokens,
    CallCanceller* canceller, StreamState* state) {
  async::Executor* executor = options_.executor;
  // Held prefills wait before anything is reserved on decode, and may come back moved to another
  // prefill worker (its lease follows), with that worker's predicted cache hit.
  absl::Status started =
      co_await state->prefill_lease->Start(executor, canceller, request.deadline);
  if (!started.ok()) co_return started;
  if (std::optional<std::int64_t> moved = state->prefill_lease->moved_cached_tokens()) {
    cached_tokens = *moved;
  }
  const WorkerEntry& prefill = state->prefill_lease->worker();
  // Images first: encoding may take a while, and the decode's reservation holds its capacity.
  std::vector<v1::PromptImage> images;
  if (!request.images.empty()) {
    absl::StatusOr<std::vector<v1::PromptImage>> encoded =
        co_await EncodeImages(request, prefill.info().model(), cached_tokens, canceller);
    if (!encoded.ok()) co_return encoded.status();
    images = std::move(*encoded);
  }
  v1::ReserveKvResponse reservation;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(request.deadline);
    CallCanceller::Scope scope(canceller, &ctx);
    v1::ReserveKvRequest call;
    *call.mutable_version() = rpc::CurrentVersion();
    call.set_request_id(request.request_id);
    call.set_num_tokens(static_cast<std::uint32_t>(request.prompt_ids.size()));
    call.set_lease_ms(static_cast<std::uint32_t>(options_.kv_reservation_lease_ms));
    grpc::Status st = co_await CallUnary(executor, [&](auto done) {
      decode.stub().async()->ReserveKv(&ctx, &call, &reservation, std::move(done));
    });
    if (!st.ok()) co_return CallFailed(decode, "ReserveKv", ctx, st, canceller, request);
  }

  v1::PrefillResponse prefilled;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(request.deadline);
    CallCanceller::Scope scope(canceller, &ctx);
    v1::PrefillRequest call;
    FillCommon(request, &call);
    for (const v1::PromptImage& image : images) *call.add_images() = image;
    *call.mutable_kv_target() = reservation.target();
    grpc::Status st = co_await CallUnary(executor, [&](auto done) {
      prefill.stub().async()->Prefill(&ctx, &call, &prefilled, std::move(done));
    });
    if (!st.ok()) {
      // Decode would reclaim the reservation when its lease ends; free it now instead.
      if (!canceller->cancelled()) registry_->Cancel(decode, request.request_id);
      co_return CallFailed(prefill, "Prefill", ctx, st, canceller, request);
    }
  }
  if (state->prefill_lease != nullptr) state->prefill_lease->PrefillDone(prefilled);
  // The worker counts what the request's own pieces computed (rule 11) as cached; its usage
  // counts only what it found there.
  const std::int64_t cached_prompt_tokens = std::max<std::int64_t>(
      0, prefilled.cached_prompt_tokens() - state->prefill_lease->own_piece_tokens());
  if (options_.metrics != nullptr) {
    options_.metrics->kv_handoff_bytes->Increment(static_cast<double>(prefilled.kv_bytes()));
    options_.metrics->kv_handoff_seconds->Observe(prefilled.kv_transfer_us() / 1e6);
  }
  state->sink->OnPromptCached(cached_prompt_tokens);
  const std::int32_t first = prefilled.first_token_id();
  (void)co_await state->Deliver(std::span<const std::int32_t>(&first, 1));

  // Generate runs even when the first token ends the request: decode then finishes at once and
  // releases the handed-off blocks, which nothing else would free before the lease.
  v1::GenerateRequest call;
  FillCommon(request, &call);
  call.set_handoff_id(prefilled.handoff_id());
  call.set_first_token_id(first);
  // The decode has the prompt's KV: it needs where the images sit, not their rows.
  for (const v1::PromptImage& image : images) {
    v1::PromptImage* span = call.add_images();
    span->set_position(image.position());
    span->set_rows(image.rows());
    span->set_token_id(image.token_id());
  }
  absl::StatusOr<GenerationOutcome> outcome =
      co_await StreamGenerate(decode, call, request, canceller, state);
  if (!outcome.ok()) co_return outcome;
  outcome->usage.set_cached_prompt_tokens(cached_prompt_tokens);
  co_return outcome;
}

async::Task<absl::StatusOr<GenerationOutcome>> Dispatcher::StreamGenerate(
    const WorkerEntry& worker, const v1::GenerateRequest& call, const GenerationRequest& request,
    CallCanceller* canceller, StreamState* state) {
  grpc::ClientContext ctx;
  ctx.set_deadline(request.deadline);
  CallCanceller::Scope scope(canceller, &ctx);
  GenerateStream stream(options_.executor);
  stream.Start(worker.stub(), &ctx, &call);
  GenerationOutcome outcome;
  std::string worker_error;
  bool finished = false;
  while (const v1::GenerateResponse* message = co_await stream.Next()) {
    if (message->token_ids_size() > 0) {
      if (state->cached_from_stream && message->has_usage()) {
        state->sink->OnPromptCached(message->usage().cached_prompt_tokens());
        state->cached_from_stream = false;
      }
      // Once the output has ended (a stop sequence, possibly in the prefill's first token), the
      // worker is told to stop; it sees the cancellation and frees the request.
      if (!co_await state->Deliver({message->token_ids().data(),
                                    static_cast<size_t>(message->token_ids_size())})) {
        ctx.TryCancel();
      }
    }
    if (message->finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      finished = true;
      outcome.finish_reason = message->finish_reason();
      outcome.usage = message->usage();
      worker_error = message->error();
    }
  }
  const grpc::Status st = co_await stream.Finished();
  if (state->stopped_by_sink) {
    GenerationOutcome stopped;
    stopped.finish_reason = v1::FINISH_REASON_STOP;
    stopped.usage.set_prompt_tokens(static_cast<std::uint32_t>(request.prompt_ids.size()));
    // The worker's count when it finished on its own (a stop token); else what reached us.
    stopped.usage.set_completion_tokens(finished ? outcome.usage.completion_tokens()
                                                 : state->tokens_seen);
    if (finished) stopped.usage.set_cached_prompt_tokens(outcome.usage.cached_prompt_tokens());
    co_return stopped;
  }
  if (!finished) {
    if (!st.ok()) co_return CallFailed(worker, "Generate", ctx, st, canceller, request);
    co_return absl::InternalError(
        absl::StrCat("worker ", worker.id(), " ended the Generate stream without finishing"));
  }
  switch (outcome.finish_reason) {
    case v1::FINISH_REASON_STOP:
    case v1::FINISH_REASON_LENGTH:
      break;
    case v1::FINISH_REASON_ERROR:
      co_return absl::InternalError(absl::StrCat("worker ", worker.id(), ": ", worker_error));
    default:
      if (std::chrono::system_clock::now() >= request.deadline) {
        co_return absl::DeadlineExceededError("the request deadline passed");
      }
      co_return absl::AbortedError(
          absl::StrCat("worker ", worker.id(), " cancelled the generation"));
  }
  if (outcome.usage.prompt_tokens() == 0) {
    outcome.usage.set_prompt_tokens(static_cast<std::uint32_t>(request.prompt_ids.size()));
  }
  co_return outcome;
}

namespace {

absl::Status Marked(absl::Status status, const char* payload) {
  status.SetPayload(payload, absl::Cord("1"));
  return status;
}

}  // namespace

absl::Status DrainRefusal(std::string message) {
  return Marked(absl::UnavailableError(std::move(message)), kDrainRefusalPayload);
}

bool IsDrainRefusal(const absl::Status& status) {
  return status.GetPayload(kDrainRefusalPayload).has_value();
}

absl::Status ImageRowsNeeded(std::string message) {
  return Marked(absl::FailedPreconditionError(std::move(message)), kImageRowsNeededPayload);
}

bool IsImageRowsNeeded(const absl::Status& status) {
  return status.GetPayload(kImageRowsNeededPayload).has_value();
}

absl::Status Dispatcher::CallFailed(const WorkerEntry& worker, const char* call,
                                    const grpc::ClientContext& ctx, const grpc::Status& status,
                                    CallCanceller* canceller, const GenerationRequest& request) {
  if (canceller->cancelled()) return canceller->reason();
  const std::string where = absl::StrCat("worker ", worker.id(), " ", call, ": ");
  if (ctx.GetServerTrailingMetadata().count(rpc::kDrainingTrailer) > 0) {
    registry_->MarkDraining(worker);
    return DrainRefusal(absl::StrCat(where, status.error_message()));
  }
  if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION &&
      ctx.GetServerTrailingMetadata().count(rpc::kImageRowsNeededTrailer) > 0) {
    return ImageRowsNeeded(absl::StrCat(where, status.error_message()));
  }
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::CANCELLED:  // not by us: the worker dropped the call (shutting down)
      registry_->MarkDown(worker, absl::StrCat(call, " failed: ", status.error_message()));
      return absl::UnavailableError(absl::StrCat(where, status.error_message()));
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      if (std::chrono::system_clock::now() < request.deadline) {
        // The worker's own time bound (a KV handoff that never arrived within its lease), not
        // the request's: this attempt is lost, the request is not (it migrates).
        return absl::AbortedError(absl::StrCat(where, status.error_message()));
      }
      return absl::DeadlineExceededError(absl::StrCat(where, "the request deadline passed"));
    default:
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          absl::StrCat(where, status.error_message()));
  }
}

}  // namespace tandem::router
