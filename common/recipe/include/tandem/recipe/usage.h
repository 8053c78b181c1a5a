#pragma once

// Token accounting shared by the response builders of all three protocols.

#include <cstdint>
#include <optional>

namespace tandem::recipe {

// What the backend reports before the first output token.
struct PromptUsage {
  std::int64_t prompt_tokens = 0;
  std::int64_t prompt_cache_hit_tokens = 0;
};

// Why the backend stopped; the protocol finish reason also depends on what was parsed
// (a parsed tool call turns kStop into "tool_calls" / "tool_use").
enum class FinishReason { kStop, kLength, kContentFilter };

struct CompletionUsage {
  PromptUsage prompt;
  std::int64_t completion_tokens = 0;
  // Reported only when the caller pushes one token per Push (see StreamProcessor).
  std::optional<std::int64_t> reasoning_tokens;
};

}  // namespace tandem::recipe
