#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "api/http/api_error.h"
#include "nlohmann/json.hpp"
#include "tandem/engine/sampling.h"

namespace tandem::router {

// The fields of an OpenAI completions request that the router honours, type- and range-checked.
// Absent optional fields keep the OpenAI defaults. (Chat Completions, Responses and Messages go
// through the recipe: protocol_api.h.)
struct OpenAiRequest {
  std::string model;  // empty: the served model
  // Completions: the prompt as text, or as token ids when the client sent ids.
  std::optional<std::string> prompt_text;
  std::vector<std::int32_t> prompt_ids;
  std::optional<int> max_tokens;  // absent: 16, as OpenAI
  // Temperature, top-k/p, min-p, penalties and seed; stop ids and max_tokens are set later, once
  // the model's conventions and context are known.
  engine::SamplingParams sampling;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  bool return_token_ids = false;  // extension: ids of the prompt and the output in the choice
  std::string cache_salt;  // as vLLM's: prefixes are shared only with the same salt (and tenant)
};

// `cache_salt` of a request body, validated: absent (""), or a non-empty string of at most 1024
// bytes. The field name for the error is "cache_salt".
std::optional<ApiError> ParseCacheSalt(const nlohmann::json* value, std::string* out);

// Parses and validates a request body; the error names the offending field.
std::optional<ApiError> ParseOpenAiRequest(absl::string_view body, OpenAiRequest* out);

}  // namespace tandem::router
