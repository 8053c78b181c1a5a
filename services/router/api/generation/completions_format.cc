#include "api/generation/completions_format.h"

#include "absl/strings/str_cat.h"
#include "api/http/api_error.h"

namespace tandem::router {

CompletionsFormat::CompletionsFormat(ResponseContext response, std::unique_ptr<TextStream> text,
                                     bool streaming, bool include_usage)
    : response_(std::move(response)),
      text_(std::move(text)),
      streaming_(streaming),
      include_usage_(include_usage) {}

v1::Usage CompletionsFormat::ClientUsage(const GenerationOutcome& outcome) const {
  v1::Usage usage;
  usage.set_prompt_tokens(static_cast<std::uint32_t>(response_.prompt_ids.size()));
  // Tokens past a stop sequence were generated but are not part of the answer.
  usage.set_completion_tokens(text_->stopped() ? static_cast<std::uint32_t>(text_->consumed())
                                               : outcome.usage.completion_tokens());
  usage.set_cached_prompt_tokens(outcome.usage.cached_prompt_tokens());
  return usage;
}

absl::StatusOr<bool> CompletionsFormat::Push(std::span<const std::int32_t> ids,
                                             std::vector<http::SseEvent>* events) {
  const std::size_t ids_before = text_->token_ids().size();
  std::string delta;
  for (std::int32_t id : ids) {
    absl::StatusOr<std::string> piece = text_->Push(id);
    if (!piece.ok()) {
      return absl::InternalError(
          absl::StrCat("the worker produced an undecodable token: ", piece.status().message()));
    }
    delta += *piece;
    if (text_->stopped()) break;
  }
  if (!streaming_) {
    full_text_ += delta;
    return !text_->stopped();
  }
  const auto& all_ids = text_->token_ids();
  std::span<const std::int32_t> new_ids(all_ids.data() + ids_before, all_ids.size() - ids_before);
  if (!delta.empty() || !new_ids.empty() || !sent_first_chunk_) {
    const bool first = !sent_first_chunk_;
    sent_first_chunk_ = true;
    events->push_back({.data = FormatChunk(response_, first, delta, new_ids, "")});
  }
  return !text_->stopped();
}

std::vector<http::SseEvent> CompletionsFormat::Finish(const GenerationOutcome& outcome) {
  const std::string tail = text_->Finish();
  finish_ = FinishReasonName(text_->stopped(), outcome.finish_reason);
  usage_ = ClientUsage(outcome);
  std::vector<http::SseEvent> events;
  if (!streaming_) {
    full_text_ += tail;
    return events;
  }
  if (!tail.empty()) {
    events.push_back({.data = FormatChunk(response_, !sent_first_chunk_, tail, {}, "")});
    sent_first_chunk_ = true;
  }
  events.push_back({.data = FormatChunk(response_, !sent_first_chunk_, "", {}, finish_)});
  if (include_usage_) events.push_back({.data = FormatUsageChunk(response_, usage_)});
  events.push_back({.data = "[DONE]"});
  return events;
}

http::Response CompletionsFormat::WholeResponse() {
  return http::Response::Json(
      200, FormatFullResponse(response_, full_text_, text_->token_ids(), finish_, usage_));
}

http::Response CompletionsFormat::ErrorResponse(const absl::Status& status) const {
  return ApiError::FromStatus(status).ToResponse();
}

std::vector<http::SseEvent> CompletionsFormat::ErrorEvents(const absl::Status& status) const {
  return {{.data = ApiError::FromStatus(status).ToJson()}, {.data = "[DONE]"}};
}

}  // namespace tandem::router
