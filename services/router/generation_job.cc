#include "generation_job.h"

#include "absl/strings/str_cat.h"
#include "writer_slot.h"

namespace tandem::router {
namespace {

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

GenerationJob::GenerationJob(JobSetup setup) : setup_(std::move(setup)) {}

absl::StatusOr<GenerationOutcome> GenerationJob::Dispatch() {
  setup_.ticket->Started();
  absl::StatusOr<GenerationOutcome> outcome =
      setup_.dispatcher->Run(setup_.request, setup_.plan, setup_.canceller.get(), this);
  setup_.plan = WorkerPlan{};  // the workers' load drops now, not when the response is written
  if (!decode_error_.ok()) return decode_error_;
  return outcome;
}

v1::Usage GenerationJob::ClientUsage(const GenerationOutcome& outcome) const {
  v1::Usage usage;
  usage.set_prompt_tokens(static_cast<std::uint32_t>(setup_.request.prompt_ids.size()));
  // Tokens past a stop sequence were generated but are not part of the answer.
  usage.set_completion_tokens(setup_.text->stopped() ? static_cast<std::uint32_t>(setup_.text->consumed())
                                                 : outcome.usage.completion_tokens());
  usage.set_cached_prompt_tokens(outcome.usage.cached_prompt_tokens());
  return usage;
}

void GenerationJob::ObserveLatency(size_t tokens) {
  const auto now = std::chrono::steady_clock::now();
  if (setup_.metrics != nullptr) {
    if (!seen_token_) {
      setup_.metrics->ttft_seconds->Observe(Seconds(now - setup_.arrived));
    } else if (tokens > 0) {
      // Tokens arriving together shared the wait.
      const double per_token = Seconds(now - last_token_) / static_cast<double>(tokens);
      for (size_t i = 0; i < tokens; ++i) setup_.metrics->inter_token_latency_seconds->Observe(per_token);
    }
  }
  seen_token_ = true;
  last_token_ = now;
}

bool GenerationJob::OnTokens(std::span<const std::int32_t> ids) {
  ObserveLatency(ids.size());
  const size_t ids_before = setup_.text->token_ids().size();
  std::string delta;
  for (std::int32_t id : ids) {
    absl::StatusOr<std::string> piece = setup_.text->Push(id);
    if (!piece.ok()) {
      decode_error_ = absl::InternalError(
          absl::StrCat("the worker produced an undecodable token: ", piece.status().message()));
      return false;
    }
    delta += *piece;
    if (setup_.text->stopped()) break;
  }
  if (!streaming_) {
    full_text_ += delta;
    return !setup_.text->stopped();
  }
  if (!OpenStream()) return false;
  const auto& all_ids = setup_.text->token_ids();
  std::span<const std::int32_t> new_ids(all_ids.data() + ids_before, all_ids.size() - ids_before);
  if (!delta.empty() || !new_ids.empty() || !sent_first_chunk_) {
    const bool first = !sent_first_chunk_;
    sent_first_chunk_ = true;
    if (!WriteEvent(FormatChunk(setup_.response, first, delta, new_ids, ""))) return false;
  }
  return !setup_.text->stopped();
}

bool GenerationJob::WriteEvent(const std::string& data) {
  absl::Status st = writer_->Write(http::SseEvent{.data = data}, setup_.sse_write_timeout);
  if (st.ok()) return true;
  // A client that left or stopped reading: the workers must stop too.
  setup_.canceller->Cancel(absl::CancelledError(absl::StrCat("client stream: ", st.message())));
  return false;
}

std::function<void()> GenerationJob::CancelOnDisconnect() const {
  std::weak_ptr<CallCanceller> weak = setup_.canceller;
  return [weak] {
    if (auto canceller = weak.lock()) {
      canceller->Cancel(absl::CancelledError("the client disconnected"));
    }
  };
}

void GenerationJob::Answer(http::Response response) {
  if (setup_.metrics != nullptr) setup_.metrics->CountRequest(setup_.endpoint, response.status);
  responder_->Respond(std::move(response));
}

void GenerationJob::RunToCompletion(std::shared_ptr<http::Responder> responder) {
  responder_ = std::move(responder);
  responder_->OnCancel(CancelOnDisconnect());
  absl::StatusOr<GenerationOutcome> outcome = Dispatch();
  if (!outcome.ok()) return Answer(ApiError::FromStatus(outcome.status()).ToResponse());
  full_text_ += setup_.text->Finish();
  const std::string finish = FinishReasonName(setup_.text->stopped(), outcome->finish_reason);
  Answer(http::Response::Json(200, FormatFullResponse(setup_.response, full_text_,
                                                      setup_.text->token_ids(), finish,
                                                      ClientUsage(*outcome))));
}

bool GenerationJob::OpenStream() {
  if (writer_ != nullptr) return true;
  if (open_failed_) return false;
  auto slot = std::make_shared<WriterSlot>();
  http::SseResponse sse;
  sse.on_open = [slot, guard = std::make_shared<AbandonOnDrop>(slot)](
                    std::shared_ptr<http::SseWriter> writer) { slot->Set(std::move(writer)); };
  if (setup_.metrics != nullptr) setup_.metrics->CountRequest(setup_.endpoint, 200);
  responder_->RespondStream(std::move(sse));
  writer_ = slot->Wait(*setup_.canceller, setup_.sse_write_timeout);
  if (writer_ == nullptr) {
    open_failed_ = true;
    setup_.canceller->Cancel(absl::CancelledError("the client left before the stream opened"));
    return false;
  }
  if (setup_.metrics != nullptr) setup_.metrics->active_streams->Increment();
  writer_->OnCancel(CancelOnDisconnect());
  if (setup_.response.endpoint == ApiEndpoint::kChatCompletions) {
    // Chat clients expect the assistant role before any content.
    sent_first_chunk_ = true;
    return WriteEvent(FormatChunk(setup_.response, /*first=*/true, "", {}, ""));
  }
  return true;
}

void GenerationJob::RunStreaming(std::shared_ptr<http::Responder> responder) {
  streaming_ = true;
  responder_ = std::move(responder);
  responder_->OnCancel(CancelOnDisconnect());
  absl::StatusOr<GenerationOutcome> outcome = Dispatch();
  if (!outcome.ok() && writer_ == nullptr) {
    // Nothing was sent yet: the failure gets its own status (429 + Retry-After, 503, ...).
    if (!open_failed_) Answer(ApiError::FromStatus(outcome.status()).ToResponse());
    return;
  }
  if (!outcome.ok()) {
    // The head went out as 200 with the first token; the error travels in the stream.
    if (!writer_->cancelled() && WriteEvent(ApiError::FromStatus(outcome.status()).ToJson())) {
      WriteEvent("[DONE]");
    }
  } else if (OpenStream()) {
    const std::string tail = setup_.text->Finish();
    const std::string finish = FinishReasonName(setup_.text->stopped(), outcome->finish_reason);
    bool ok = true;
    if (!tail.empty()) {
      ok = WriteEvent(FormatChunk(setup_.response, !sent_first_chunk_, tail, {}, ""));
      sent_first_chunk_ = true;
    }
    ok = ok && WriteEvent(FormatChunk(setup_.response, !sent_first_chunk_, "", {}, finish));
    if (ok && setup_.include_usage) ok = WriteEvent(FormatUsageChunk(setup_.response, ClientUsage(*outcome)));
    if (ok) WriteEvent("[DONE]");
  }
  if (writer_ == nullptr) return;
  writer_->Close();
  writer_.reset();
  if (setup_.metrics != nullptr) setup_.metrics->active_streams->Decrement();
}

}  // namespace tandem::router
