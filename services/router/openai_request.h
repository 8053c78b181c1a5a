#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "api_error.h"
#include "chat_renderer.h"

namespace tandem::router {

enum class ApiEndpoint { kCompletions, kChatCompletions };

// The fields of an OpenAI completions or chat request that the router honours, type- and
// range-checked. Absent optional fields keep the OpenAI defaults.
struct OpenAiRequest {
  ApiEndpoint endpoint = ApiEndpoint::kCompletions;
  std::string model;  // empty: the served model
  // Completions: the prompt as text, or as token ids when the client sent ids.
  std::optional<std::string> prompt_text;
  std::vector<std::int32_t> prompt_ids;
  std::vector<ChatMessage> messages;  // chat
  std::optional<int> max_tokens;      // absent: 16 (completions) or the rest of the context (chat)
  float temperature = 1.0f;
  float top_p = 1.0f;
  int top_k = 0;
  float min_p = 0.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  std::optional<std::uint64_t> seed;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  bool return_token_ids = false;  // extension: ids of the prompt and the output in the choice
};

// Parses and validates a request body; the error names the offending field.
std::optional<ApiError> ParseOpenAiRequest(ApiEndpoint endpoint, absl::string_view body,
                                           OpenAiRequest* out);

}  // namespace tandem::router
