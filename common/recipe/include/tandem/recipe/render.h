#pragma once

// Conversation -> prompt text for DeepSeek V4 / V4.1 (byte-identical to deepseek-recipe's
// DeepseekV4Encoding / DeepseekV41Encoding), or a plain prompt for models without a chat format,
// and prompt -> token ids.
//
// A rendered prompt records which byte ranges are control tokens the template wrote. Everything
// else (user text, names, tool schemas, tool results, reasoning) is plain text, and EncodePrompt
// encodes it without the tokenizer's added vocabulary: a client that types "<｜User｜>" gets the
// ordinary tokens of those characters, never the control id.
//
//   RenderedPrompt rendered = RenderConversation(request.conversation, request.model_version);
//   TANDEM_ASSIGN_OR_RETURN(std::vector<std::int32_t> ids, EncodePrompt(rendered, tokenizer));

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tandem/recipe/conversation.h"

namespace tandem::tokenizer {
class HfBpeTokenizer;
}

namespace tandem::recipe {

// The DeepSeek V4 control-token spellings (U+FF5C FULLWIDTH VERTICAL LINE, U+2581 LOWER ONE
// EIGHTH BLOCK), as the DeepSeek-V4 tokenizer.json spells its added tokens.
inline constexpr absl::string_view kBosToken = "<｜begin▁of▁sentence｜>";
inline constexpr absl::string_view kEosToken = "<｜end▁of▁sentence｜>";
inline constexpr absl::string_view kUserToken = "<｜User｜>";
inline constexpr absl::string_view kAssistantToken = "<｜Assistant｜>";
inline constexpr absl::string_view kSystemToken = "<｜System｜>";  // V4.1 only
inline constexpr absl::string_view kLatestReminderToken = "<｜latest_reminder｜>";
inline constexpr absl::string_view kThinkingStartToken = "<think>";
inline constexpr absl::string_view kThinkingEndToken = "</think>";
inline constexpr absl::string_view kDsmlToken = "｜DSML｜";
inline constexpr absl::string_view kImageToken = "<｜image｜>";

struct RenderedPrompt {
  std::string prompt;
  // Ascending, disjoint [begin, end) byte ranges of `prompt`, each the spelling of one control
  // token. (deepseek-recipe's Python binding reports code-point offsets; these are bytes.)
  std::vector<std::pair<std::size_t, std::size_t>> special_ranges;
};

// Never fails: every Conversation has a rendering (tool-call arguments that are not a JSON object
// are rendered as one string parameter named "arguments", as the reference does).
RenderedPrompt RenderConversation(const Conversation& conversation, ModelVersion version);

// For models without a chat format (stories260K): the message contents joined by "\n", so a
// single user message renders as exactly its text. No control tokens.
RenderedPrompt RenderPlainConversation(const Conversation& conversation);

// Control ranges -> their token ids; the text between them through the plain-text encoder (no
// added-token matching). No BOS is added: the template writes it. Fails if the tokenizer lacks a
// control token the prompt uses, or on text that is not valid UTF-8.
absl::StatusOr<std::vector<std::int32_t>> EncodePrompt(const RenderedPrompt& rendered,
                                                       const tokenizer::HfBpeTokenizer& tokenizer);

}  // namespace tandem::recipe
