#include "protocol_job.h"

#include "absl/strings/str_cat.h"
#include "protocol_errors.h"

namespace tandem::router {

ProtocolJob::ProtocolJob(ProtocolJobSetup setup)
    : setup_(std::move(setup)),
      processor_(setup_.request, setup_.response_id, setup_.model, setup_.created_unix_s),
      latency_(setup_.metrics, setup_.arrived) {
  processor_.CountReasoningTokens(true);
}

absl::StatusOr<GenerationOutcome> ProtocolJob::Dispatch() {
  absl::StatusOr<GenerationOutcome> outcome =
      RunAdmitted(setup_.run, setup_.ticket.get(), setup_.generation, setup_.canceller.get(), this);
  if (!decode_error_.ok()) return decode_error_;
  return outcome;
}

void ProtocolJob::OnPromptCached(std::uint32_t cached_prompt_tokens) {
  cached_prompt_tokens_ = cached_prompt_tokens;
}

void ProtocolJob::EnsureReady() {
  if (ready_) return;
  ready_ = true;
  std::vector<recipe::OutputEvent> events = processor_.Ready(recipe::PromptUsage{
      .prompt_tokens = static_cast<std::int64_t>(setup_.generation.prompt_ids.size()),
      .prompt_cache_hit_tokens = cached_prompt_tokens_.value_or(0)});
  Send(std::move(events));
}

bool ProtocolJob::Send(std::vector<recipe::OutputEvent> events) {
  if (!streaming_ || events.empty()) return true;
  if (!channel_->OpenStream()) return false;
  for (recipe::OutputEvent& event : events) {
    if (!channel_->Write(http::SseEvent{.data = std::move(event.data), .event = std::move(event.event)})) {
      return false;
    }
  }
  return true;
}

bool ProtocolJob::OnTokens(std::span<const std::int32_t> ids) {
  latency_.Observe(ids.size());
  EnsureReady();
  for (std::int32_t id : ids) {
    if (processor_.finished() || setup_.text->stopped()) break;
    absl::StatusOr<std::string> piece = setup_.text->Push(id);
    if (!piece.ok()) {
      decode_error_ = absl::InternalError(
          absl::StrCat("the worker produced an undecodable token: ", piece.status().message()));
      return false;
    }
    // A stop id (EOS) is not output: it ends the generation without a token of text.
    if (setup_.text->stopped() && piece->empty()) break;
    if (!Send(processor_.Push(*piece, 1))) return false;
  }
  return !processor_.finished() && !setup_.text->stopped();
}

recipe::FinishReason ProtocolJob::FinishOf(const GenerationOutcome& outcome) const {
  return outcome.finish_reason == v1::FINISH_REASON_LENGTH && !setup_.text->stopped()
             ? recipe::FinishReason::kLength
             : recipe::FinishReason::kStop;
}

http::Response ProtocolJob::ErrorResponse(const absl::Status& status) const {
  return ProtocolErrorResponse(setup_.request.protocol, status);
}

void ProtocolJob::RunToCompletion(std::shared_ptr<http::Responder> responder) {
  channel_ = std::make_unique<ClientChannel>(std::move(responder), setup_.canceller, setup_.metrics,
                                             setup_.endpoint, setup_.sse_write_timeout);
  absl::StatusOr<GenerationOutcome> outcome = Dispatch();
  if (!outcome.ok()) return channel_->Answer(ErrorResponse(outcome.status()));
  Complete(*outcome);
  channel_->Answer(http::Response::Json(200, processor_.FinalResponse()));
}

bool ProtocolJob::Complete(const GenerationOutcome& outcome) {
  EnsureReady();
  // Bytes held back for an unfinished character belong to tokens already counted.
  if (std::string tail = setup_.text->Finish(); !tail.empty() && !processor_.finished()) {
    if (!Send(processor_.Push(tail, 0))) return false;
  }
  return Send(processor_.Finish(FinishOf(outcome)));
}

void ProtocolJob::RunStreaming(std::shared_ptr<http::Responder> responder) {
  streaming_ = true;
  channel_ = std::make_unique<ClientChannel>(std::move(responder), setup_.canceller, setup_.metrics,
                                             setup_.endpoint, setup_.sse_write_timeout);
  absl::StatusOr<GenerationOutcome> outcome = Dispatch();
  if (!outcome.ok() && !channel_->stream_open()) {
    // Nothing was sent yet: the failure gets its own status (429 + Retry-After, 503, ...).
    if (!channel_->open_failed()) channel_->Answer(ErrorResponse(outcome.status()));
    return;
  }
  if (!outcome.ok()) {
    // The head went out as 200; the error travels in the stream as the protocol's error event.
    if (!channel_->client_gone()) {
      const recipe::Protocol protocol = setup_.request.protocol;
      std::string body = ErrorResponse(outcome.status()).body;
      channel_->Write(http::SseEvent{
          .data = std::move(body),
          .event = protocol == recipe::Protocol::kChatCompletions ? "" : "error"});
    }
  } else {
    if (Complete(*outcome)) {
      if (auto done = recipe::StreamProcessor::SseDoneData(setup_.request.protocol)) {
        channel_->Write(http::SseEvent{.data = *done});
      }
    }
  }
  channel_->CloseStream();
}

}  // namespace tandem::router
