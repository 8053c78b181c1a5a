#pragma once

// The pieces of the Anthropic Messages conversion: `messages` (convert_messages_turns.cc) and
// tools with the tool choice (convert_messages_tools.cc).

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "convert/convert_responses_shared.h"
#include "tandem/recipe/conversation.h"
#include "tandem/recipe/convert.h"

namespace tandem::recipe::internal {

// One entry of `messages`, shape-checked; `content` points into the request body.
struct MessagesTurn {
  std::string role;  // user, assistant, system
  const Json* content = nullptr;
};

// Checks the shape of every message and block (serde's errors) before any conversion rule.
absl::StatusOr<std::vector<MessagesTurn>> ReadMessagesTurns(const Json& messages);

// Appends the messages of `turns`, enforcing tool_use / tool_result pairing. V4.1 reads images
// and has system turns; V4 gets image placeholders and system reminders in the user turn.
absl::Status ConvertMessagesTurns(const std::vector<MessagesTurn>& turns,
                                  const ConversionOptions& options, ModelVersion version,
                                  std::vector<Message>& out);

// A declared tool: a client tool (no "type") or a server tool this stack cannot run.
struct MessagesToolDecl {
  ToolSpec spec;
  bool server = false;
};
absl::StatusOr<std::vector<MessagesToolDecl>> ReadMessagesTools(const Json& body);
// The client tools with checked names; web search is dropped or refused per options, other
// server tools are refused. Schemas are checked later, once the tool choice is known.
absl::StatusOr<std::vector<ToolSpec>> CheckMessagesTools(const std::vector<MessagesToolDecl>& decls,
                                                         const ConversionOptions& options);

// `tool_choice` as a tool choice spec; a choice naming a dropped server tool reads as auto.
absl::StatusOr<ToolChoiceSpec> ReadMessagesToolChoice(const Json& body,
                                                      const std::vector<MessagesToolDecl>& decls);

}  // namespace tandem::recipe::internal
