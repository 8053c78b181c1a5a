#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tandem/recipe/conversation.h"

namespace tandem::router {

// How conversations become prompts for the served model.
enum class ChatFormat {
  kPlain,        // no chat format (stories260K): contents joined by "\n", no reasoning or tools
  kDeepseekV4,   // deepseek-recipe's V4 encoding
  kDeepseekV41,  // deepseek-recipe's V4.1 encoding
};

// "plain", "deepseek-v4", "deepseek-v4.1", or "auto": DeepSeek V4 when the checkpoint's
// config.json says model_type deepseek_v4, else plain.
absl::StatusOr<ChatFormat> ResolveChatFormat(absl::string_view flag, const std::string& model_dir);

absl::string_view ChatFormatName(ChatFormat format);

// The recipe model version a DeepSeek format renders with (kDeepseekV4 for plain: unused).
recipe::ModelVersion ModelVersionOf(ChatFormat format);

}  // namespace tandem::router
