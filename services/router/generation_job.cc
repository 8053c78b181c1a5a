#include "generation_job.h"

#include "absl/strings/str_cat.h"

namespace tandem::router {
namespace {

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

GenerationJob::GenerationJob(JobSetup setup) : s_(std::move(setup)) {}

absl::StatusOr<GenerationOutcome> GenerationJob::Dispatch() {
  s_.ticket->Started();
  absl::StatusOr<GenerationOutcome> outcome =
      s_.dispatcher->Run(s_.request, s_.plan, s_.canceller.get(), this);
  s_.plan = WorkerPlan{};  // the workers' load drops now, not when the response is written
  if (!decode_error_.ok()) return decode_error_;
  return outcome;
}

v1::Usage GenerationJob::ClientUsage(const GenerationOutcome& outcome) const {
  v1::Usage usage;
  usage.set_prompt_tokens(static_cast<std::uint32_t>(s_.request.prompt_ids.size()));
  usage.set_completion_tokens(outcome.usage.completion_tokens());
  usage.set_cached_prompt_tokens(outcome.usage.cached_prompt_tokens());
  return usage;
}

void GenerationJob::ObserveLatency(size_t tokens) {
  const auto now = std::chrono::steady_clock::now();
  if (s_.metrics != nullptr) {
    if (!seen_token_) {
      s_.metrics->ttft_seconds->Observe(Seconds(now - s_.arrived));
    } else if (tokens > 0) {
      // Tokens arriving together shared the wait.
      const double per_token = Seconds(now - last_token_) / static_cast<double>(tokens);
      for (size_t i = 0; i < tokens; ++i) s_.metrics->inter_token_latency_seconds->Observe(per_token);
    }
  }
  seen_token_ = true;
  last_token_ = now;
}

bool GenerationJob::OnTokens(std::span<const std::int32_t> ids) {
  ObserveLatency(ids.size());
  const size_t ids_before = s_.text->token_ids().size();
  std::string delta;
  for (std::int32_t id : ids) {
    absl::StatusOr<std::string> piece = s_.text->Push(id);
    if (!piece.ok()) {
      decode_error_ = absl::InternalError(
          absl::StrCat("the worker produced an undecodable token: ", piece.status().message()));
      return false;
    }
    delta += *piece;
    if (s_.text->stopped()) break;
  }
  if (writer_ == nullptr) {
    full_text_ += delta;
    return !s_.text->stopped();
  }
  const auto& all_ids = s_.text->token_ids();
  std::span<const std::int32_t> new_ids(all_ids.data() + ids_before, all_ids.size() - ids_before);
  if (!delta.empty() || !new_ids.empty() || !sent_first_chunk_) {
    const bool first = !sent_first_chunk_;
    sent_first_chunk_ = true;
    if (!WriteEvent(FormatChunk(s_.response, first, delta, new_ids, ""))) return false;
  }
  return !s_.text->stopped();
}

bool GenerationJob::WriteEvent(const std::string& data) {
  absl::Status st = writer_->Write(http::SseEvent{.data = data}, s_.sse_write_timeout);
  if (st.ok()) return true;
  // A client that left or stopped reading: the workers must stop too.
  s_.canceller->Cancel(absl::CancelledError(absl::StrCat("client stream: ", st.message())));
  return false;
}

std::function<void()> GenerationJob::CancelOnDisconnect() const {
  std::weak_ptr<CallCanceller> weak = s_.canceller;
  return [weak] {
    if (auto canceller = weak.lock()) {
      canceller->Cancel(absl::CancelledError("the client disconnected"));
    }
  };
}

void GenerationJob::RunToCompletion(std::shared_ptr<http::Responder> responder) {
  responder->OnCancel(CancelOnDisconnect());
  absl::StatusOr<GenerationOutcome> outcome = Dispatch();
  http::Response response;
  if (!outcome.ok()) {
    response = ApiError::FromStatus(outcome.status()).ToResponse();
  } else {
    full_text_ += s_.text->Finish();
    const std::string finish = FinishReasonName(s_.text->stopped(), outcome->finish_reason);
    response = http::Response::Json(
        200, FormatFullResponse(s_.response, full_text_, s_.text->token_ids(), finish,
                                ClientUsage(*outcome)));
  }
  if (s_.metrics != nullptr) s_.metrics->CountRequest(s_.endpoint, response.status);
  responder->Respond(std::move(response));
}

void GenerationJob::RunStreaming(std::shared_ptr<http::SseWriter> writer) {
  writer_ = std::move(writer);
  if (s_.metrics != nullptr) s_.metrics->active_streams->Increment();
  writer_->OnCancel(CancelOnDisconnect());
  if (s_.response.endpoint == ApiEndpoint::kChatCompletions) {
    // Chat clients expect the assistant role before any content.
    sent_first_chunk_ = true;
    WriteEvent(FormatChunk(s_.response, /*first=*/true, "", {}, ""));
  }
  absl::StatusOr<GenerationOutcome> outcome = Dispatch();
  if (outcome.ok()) {
    const std::string tail = s_.text->Finish();
    const std::string finish = FinishReasonName(s_.text->stopped(), outcome->finish_reason);
    bool ok = true;
    if (!tail.empty()) ok = WriteEvent(FormatChunk(s_.response, !sent_first_chunk_, tail, {}, ""));
    sent_first_chunk_ = true;
    ok = ok && WriteEvent(FormatChunk(s_.response, false, "", {}, finish));
    if (ok && s_.include_usage) ok = WriteEvent(FormatUsageChunk(s_.response, ClientUsage(*outcome)));
    if (ok) WriteEvent("[DONE]");
  } else if (!writer_->cancelled()) {
    // Headers went out as 200 long ago; the error travels in the stream.
    if (WriteEvent(ApiError::FromStatus(outcome.status()).ToJson())) WriteEvent("[DONE]");
  }
  writer_->Close();
  writer_.reset();
  if (s_.metrics != nullptr) s_.metrics->active_streams->Decrement();
}

}  // namespace tandem::router
