#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "api/generation/response_format.h"
#include "api/generation/text_stream.h"
#include "tandem/recipe/conversation.h"
#include "tandem/recipe/stream_processor.h"

namespace tandem::router {

// Chat Completions, Responses and Messages through deepseek-recipe's semantics
// (recipe::StreamProcessor): reasoning, content, tool calls, stop sequences, usage.
class RecipeFormat final : public ResponseFormat {
 public:
  // `text` turns ids into text; stop ids end it, stop sequences are the processor's.
  RecipeFormat(recipe::ConversationRequest request, const std::string& response_id,
               const std::string& model, std::int64_t created_unix_s,
               std::unique_ptr<TextStream> text, std::size_t prompt_tokens);

  void OnPromptCached(std::uint32_t cached_prompt_tokens) override;
  absl::StatusOr<bool> Push(std::span<const std::int32_t> ids,
                            std::vector<http::SseEvent>* events) override;
  std::vector<http::SseEvent> Finish(const GenerationOutcome& outcome) override;
  http::Response WholeResponse() override;
  http::Response ErrorResponse(const absl::Status& status) const override;
  std::vector<http::SseEvent> ErrorEvents(const absl::Status& status) const override;

 private:
  // The stream's opening events once, with the cache hits reported before the first token.
  void EnsureReady(std::vector<http::SseEvent>* events);
  static void Append(std::vector<recipe::OutputEvent> from, std::vector<http::SseEvent>* to);

  // The processor's writers point into the request: it lives as long as they do.
  const recipe::ConversationRequest request_;
  recipe::StreamProcessor processor_;
  const std::unique_ptr<TextStream> text_;
  const std::size_t prompt_tokens_;
  bool ready_ = false;
  std::optional<std::uint32_t> cached_prompt_tokens_;
};

}  // namespace tandem::router
