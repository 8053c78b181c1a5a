#include "generation_job.h"

#include "absl/strings/str_cat.h"
#include "writer_slot.h"

namespace tandem::router {

GenerationJob::GenerationJob(JobSetup setup)
    : setup_(std::move(setup)), latency_(setup_.metrics, setup_.arrived) {}

absl::StatusOr<GenerationOutcome> GenerationJob::Dispatch() {
  absl::StatusOr<GenerationOutcome> outcome =
      RunAdmitted(setup_.run, setup_.ticket.get(), setup_.request, setup_.canceller.get(), this);
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

bool GenerationJob::OnTokens(std::span<const std::int32_t> ids) {
  latency_.Observe(ids.size());
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
  if (!channel_->OpenStream()) return false;
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
  return channel_->Write(http::SseEvent{.data = data});
}

void GenerationJob::RunToCompletion(std::shared_ptr<http::Responder> responder) {
  channel_ = std::make_unique<ClientChannel>(std::move(responder), setup_.canceller, setup_.metrics,
                                             setup_.endpoint, setup_.sse_write_timeout);
  absl::StatusOr<GenerationOutcome> outcome = Dispatch();
  if (!outcome.ok()) return channel_->Answer(ApiError::FromStatus(outcome.status()).ToResponse());
  full_text_ += setup_.text->Finish();
  const std::string finish = FinishReasonName(setup_.text->stopped(), outcome->finish_reason);
  channel_->Answer(http::Response::Json(200, FormatFullResponse(setup_.response, full_text_,
                                                      setup_.text->token_ids(), finish,
                                                      ClientUsage(*outcome))));
}

void GenerationJob::RunStreaming(std::shared_ptr<http::Responder> responder) {
  streaming_ = true;
  channel_ = std::make_unique<ClientChannel>(std::move(responder), setup_.canceller, setup_.metrics,
                                             setup_.endpoint, setup_.sse_write_timeout);
  absl::StatusOr<GenerationOutcome> outcome = Dispatch();
  if (!outcome.ok() && !channel_->stream_open()) {
    // Nothing was sent yet: the failure gets its own status (429 + Retry-After, 503, ...).
    if (!channel_->open_failed()) channel_->Answer(ApiError::FromStatus(outcome.status()).ToResponse());
    return;
  }
  if (!outcome.ok()) {
    // The head went out as 200 with the first token; the error travels in the stream.
    if (!channel_->client_gone() && WriteEvent(ApiError::FromStatus(outcome.status()).ToJson())) {
      WriteEvent("[DONE]");
    }
  } else if (channel_->OpenStream()) {
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
  channel_->CloseStream();
}

}  // namespace tandem::router
