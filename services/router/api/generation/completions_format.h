#pragma once

#include <memory>
#include <string>

#include "api/generation/openai_format.h"
#include "api/generation/response_format.h"
#include "api/generation/text_stream.h"

namespace tandem::router {

// /v1/completions: text chunks as tokens decode, then the finish chunk, the optional usage chunk
// and [DONE]; or one completion object.
class CompletionsFormat final : public ResponseFormat {
 public:
  // `response.prompt_ids` is the whole prompt (usage counts it).
  CompletionsFormat(ResponseContext response, std::unique_ptr<TextStream> text, bool streaming,
                    bool include_usage);

  absl::StatusOr<bool> Push(std::span<const std::int32_t> ids,
                            std::vector<http::SseEvent>* events) override;
  std::vector<http::SseEvent> Finish(const GenerationOutcome& outcome) override;
  http::Response WholeResponse() override;
  http::Response ErrorResponse(const absl::Status& status) const override;
  std::vector<http::SseEvent> ErrorEvents(const absl::Status& status) const override;

 private:
  v1::Usage ClientUsage(const GenerationOutcome& outcome) const;

  const ResponseContext response_;
  const std::unique_ptr<TextStream> text_;
  const bool streaming_;
  const bool include_usage_;
  bool sent_first_chunk_ = false;
  std::string full_text_;
  std::string finish_;
  v1::Usage usage_;
};

}  // namespace tandem::router
