#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "api/endpoints/openai_request.h"
#include "tandem/v1/common.pb.h"

namespace tandem::router {

// What every response and chunk of one request repeats.
struct ResponseContext {
  std::string id;  // cmpl-...
  std::int64_t created = 0;
  std::string model;
  bool return_token_ids = false;
  std::vector<std::int32_t> prompt_ids;
};

// "stop" / "length".
const char* FinishReasonName(bool stopped_by_text, v1::FinishReason reason);

// The non-streaming body.
std::string FormatFullResponse(const ResponseContext& ctx, const std::string& text,
                               std::span<const std::int32_t> token_ids,
                               const std::string& finish_reason, const v1::Usage& usage);

// One streamed chunk's JSON. `first` marks the opening chunk (with return_token_ids it carries
// the prompt ids); `finish_reason` is empty until the last chunk.
std::string FormatChunk(const ResponseContext& ctx, bool first, const std::string& text,
                        std::span<const std::int32_t> token_ids, const std::string& finish_reason);
// The include_usage chunk: no choices, only usage.
std::string FormatUsageChunk(const ResponseContext& ctx, const v1::Usage& usage);

}  // namespace tandem::router
