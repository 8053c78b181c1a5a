#include "api/generation/recipe_format.h"

#include "absl/strings/str_cat.h"
#include "api/endpoints/protocol_errors.h"

namespace tandem::router {

RecipeFormat::RecipeFormat(recipe::ConversationRequest request, const std::string& response_id,
                           const std::string& model, std::int64_t created_unix_s,
                           std::unique_ptr<TextStream> text, std::size_t prompt_tokens)
    : request_(std::move(request)),
      processor_(request_, response_id, model, created_unix_s),
      text_(std::move(text)),
      prompt_tokens_(prompt_tokens) {
  processor_.CountReasoningTokens(true);
}

void RecipeFormat::Append(std::vector<recipe::OutputEvent> from, std::vector<http::SseEvent>* to) {
  for (recipe::OutputEvent& event : from) {
    to->push_back({.data = std::move(event.data), .event = std::move(event.event)});
  }
}

void RecipeFormat::OnPromptCached(std::uint32_t cached_prompt_tokens) {
  cached_prompt_tokens_ = cached_prompt_tokens;
}

void RecipeFormat::EnsureReady(std::vector<http::SseEvent>* events) {
  if (ready_) return;
  ready_ = true;
  Append(processor_.Ready(
             recipe::PromptUsage{.prompt_tokens = static_cast<std::int64_t>(prompt_tokens_),
                                 .prompt_cache_hit_tokens = cached_prompt_tokens_.value_or(0)}),
         events);
}

absl::StatusOr<bool> RecipeFormat::Push(std::span<const std::int32_t> ids,
                                        std::vector<http::SseEvent>* events) {
  EnsureReady(events);
  for (std::int32_t id : ids) {
    if (processor_.finished() || text_->stopped()) break;
    absl::StatusOr<std::string> piece = text_->Push(id);
    if (!piece.ok()) {
      return absl::InternalError(
          absl::StrCat("the worker produced an undecodable token: ", piece.status().message()));
    }
    // A stop id (EOS) is not output: it ends the generation without a token of text.
    if (text_->stopped() && piece->empty()) break;
    Append(processor_.Push(*piece, 1), events);
  }
  return !processor_.finished() && !text_->stopped();
}

std::vector<http::SseEvent> RecipeFormat::Finish(const GenerationOutcome& outcome) {
  std::vector<http::SseEvent> events;
  EnsureReady(&events);
  // Bytes held back for an unfinished character belong to tokens already counted.
  if (std::string tail = text_->Finish(); !tail.empty() && !processor_.finished()) {
    Append(processor_.Push(tail, 0), &events);
  }
  const recipe::FinishReason finish =
      outcome.finish_reason == v1::FINISH_REASON_LENGTH && !text_->stopped()
          ? recipe::FinishReason::kLength
          : recipe::FinishReason::kStop;
  Append(processor_.Finish(finish), &events);
  if (auto done = recipe::StreamProcessor::SseDoneData(request_.protocol)) {
    events.push_back({.data = *done});
  }
  return events;
}

http::Response RecipeFormat::WholeResponse() {
  return http::Response::Json(200, processor_.FinalResponse());
}

http::Response RecipeFormat::ErrorResponse(const absl::Status& status) const {
  return ProtocolErrorResponse(request_.protocol, status);
}

std::vector<http::SseEvent> RecipeFormat::ErrorEvents(const absl::Status& status) const {
  return {{.data = ErrorResponse(status).body,
           .event = request_.protocol == recipe::Protocol::kChatCompletions ? "" : "error"}};
}

}  // namespace tandem::router
