#include <algorithm>

#include "absl/strings/str_cat.h"
#include "tandem/recipe/convert.h"
#include "tandem/recipe/errors.h"

namespace tandem::recipe {
namespace {

constexpr std::int64_t kNonThinkingDefault = 8192;
constexpr std::int64_t kThinkingDefault = 65536;
constexpr std::int64_t kThinkingMaxEffortDefault = 131072;

absl::Status ContextExceeded(std::int64_t limit, std::int64_t prompt, std::int64_t completion) {
  return RequestError(absl::StrCat(
      "This model's maximum context length is ", limit, " tokens. However, you requested ",
      prompt + completion, " tokens (", prompt, " in the messages, ", completion,
      " in the completion). Please reduce the length of the messages or completion."));
}

}  // namespace

absl::StatusOr<std::int64_t> ResolveMaxTokens(const ConversationRequest& request,
                                              std::int64_t prompt_tokens,
                                              std::int64_t context_limit) {
  const std::optional<std::int64_t>& requested = request.inference.max_tokens;
  if (requested.has_value()) {
    if (prompt_tokens + *requested > context_limit) {
      return ContextExceeded(context_limit, prompt_tokens, *requested);
    }
    return std::max<std::int64_t>(1, *requested);
  }
  if (prompt_tokens > context_limit) return ContextExceeded(context_limit, prompt_tokens, 0);
  const Conversation& c = request.conversation;
  std::int64_t value = kNonThinkingDefault;
  if (c.thinking_mode) {
    value = c.reasoning_effort == ReasoningEffort::kMax ? kThinkingMaxEffortDefault
                                                        : kThinkingDefault;
  }
  return std::max<std::int64_t>(1, std::min(value, context_limit - prompt_tokens));
}

}  // namespace tandem::recipe
