#pragma once

// Protocol request -> ConversationRequest. Each converter validates the whole body (types, roles,
// tool schemas, tool results against calls, limits) and reports the first problem as an
// absl::Status whose message names the offending field; `ToErrorEnvelope` (errors.h) turns it
// into the protocol's own error body and HTTP status. Conversion never has side effects.

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tandem/recipe/conversation.h"

namespace tandem::recipe {

enum class ReasoningContentBehavior { kFillEmpty, kReject };
enum class WebSearchBehavior { kDrop, kReject };

struct ConversionOptions {
  bool default_thinking_mode = true;
  ReasoningContentBehavior reasoning_content_behavior = ReasoningContentBehavior::kFillEmpty;
  WebSearchBehavior responses_web_search = WebSearchBehavior::kDrop;
  WebSearchBehavior messages_web_search = WebSearchBehavior::kReject;
  std::int64_t thinking_max_tokens_upper_bound = 393216;
  std::int64_t non_thinking_max_tokens_upper_bound = 393216;
  // Accepted request model names. The router adds its served model name as an alias.
  std::map<std::string, ModelVersion> model_versions_by_name = {
      {"DeepSeek-V4-Pro", ModelVersion::kDeepseekV4},
      {"DeepSeek-V4.1-Flash", ModelVersion::kDeepseekV41},
  };
};

// `body` keeps key order (tool schemas are rendered in the order the client wrote them).
absl::StatusOr<ConversationRequest> ConvertChatCompletions(const nlohmann::ordered_json& body,
                                                           const ConversionOptions& options);
absl::StatusOr<ConversationRequest> ConvertResponses(const nlohmann::ordered_json& body,
                                                     const ConversionOptions& options);
absl::StatusOr<ConversationRequest> ConvertMessages(const nlohmann::ordered_json& body,
                                                    const ConversionOptions& options);

// The max_tokens to send to the engine once the prompt is encoded (deepseek-recipe's
// resolve_max_tokens): the requested value, or a default by thinking mode and effort, lowered to
// the context left after the prompt; an error when the request cannot fit.
absl::StatusOr<std::int64_t> ResolveMaxTokens(const ConversationRequest& request,
                                              std::int64_t prompt_tokens,
                                              std::int64_t context_limit);

}  // namespace tandem::recipe
