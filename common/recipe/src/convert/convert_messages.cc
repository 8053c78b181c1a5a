// Anthropic Messages request -> ConversationRequest, matching deepseek-recipe's MessagesRequest.
//
// Each user text (or image, document) block becomes its own user message and each tool_result a
// tool message; an assistant message folds its thinking, text and tool_use blocks into one. A
// system-role message inside `messages` is delivered to the model as a user-side reminder.

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "convert/convert_messages_internal.h"
#include "tandem/base/status_macros.h"
#include "tandem/recipe/convert.h"

namespace tandem::recipe {
namespace {

using internal::Json;

struct MessagesFields {
  std::string model;
  std::optional<std::uint32_t> max_tokens;
  std::optional<std::string> thinking;  // enabled, adaptive, disabled
  std::optional<std::string> effort;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::vector<std::string> stop_sequences;
  bool stream = false;
};

absl::StatusOr<MessagesFields> ReadFields(const Json& body) {
  MessagesFields fields;
  TANDEM_ASSIGN_OR_RETURN(fields.model, internal::RequireString(body, "model"));
  TANDEM_ASSIGN_OR_RETURN(fields.max_tokens, internal::ReadU32(body, "max_tokens"));
  TANDEM_ASSIGN_OR_RETURN(
      const Json* thinking,
      internal::ReadObject(body, "thinking", "internally tagged enum MessagesThinking"));
  if (thinking) {
    TANDEM_ASSIGN_OR_RETURN(std::string type,
                            internal::RequireTag(*thinking, {"adaptive", "enabled", "disabled"}));
    TANDEM_RETURN_IF_ERROR(internal::ReadU32(*thinking, "budget_tokens").status());
    fields.thinking = type;
  }
  TANDEM_ASSIGN_OR_RETURN(
      const Json* output_config,
      internal::ReadObject(body, "output_config", "struct MessagesOutputConfig"));
  if (output_config) {
    TANDEM_ASSIGN_OR_RETURN(
        fields.effort, internal::ReadVariant(*output_config, "effort", internal::kEffortVariants));
  }
  TANDEM_ASSIGN_OR_RETURN(fields.temperature, internal::ReadF32(body, "temperature"));
  TANDEM_ASSIGN_OR_RETURN(fields.top_p, internal::ReadF32(body, "top_p"));
  TANDEM_RETURN_IF_ERROR(internal::ReadU32(body, "top_k").status());
  if (auto it = body.find("stop_sequences"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) return internal::InvalidType(*it, "a sequence");
    for (const Json& stop : *it) {
      if (!stop.is_string()) return internal::InvalidType(stop, "a string");
      fields.stop_sequences.push_back(stop.get<std::string>());
    }
  }
  TANDEM_ASSIGN_OR_RETURN(std::optional<bool> stream, internal::ReadBool(body, "stream"));
  fields.stream = stream.value_or(false);
  return fields;
}

// `system`: a string or text blocks joined by a blank line.
absl::StatusOr<std::optional<std::string>> ReadSystem(const Json& body) {
  auto it = body.find("system");
  if (it == body.end() || it->is_null()) return std::optional<std::string>();
  if (it->is_string()) return std::optional<std::string>(it->get<std::string>());
  if (!it->is_array()) return internal::BodyError("expected a string or a list");
  std::vector<std::string> texts;
  for (const Json& block : *it) {
    if (!block.is_object())
      return internal::InvalidType(block, "internally tagged enum MessagesSystemBlock");
    TANDEM_RETURN_IF_ERROR(internal::RequireTag(block, {"text"}).status());
    TANDEM_ASSIGN_OR_RETURN(std::string text, internal::RequireString(block, "text"));
    texts.push_back(std::move(text));
  }
  return std::optional<std::string>(absl::StrJoin(texts, "\n\n"));
}

}  // namespace

absl::StatusOr<ConversationRequest> ConvertMessages(const nlohmann::ordered_json& body,
                                                    const ConversionOptions& options) {
  if (!body.is_object()) return internal::InvalidType(body, "struct MessagesRequest");
  TANDEM_ASSIGN_OR_RETURN(MessagesFields fields, ReadFields(body));
  TANDEM_ASSIGN_OR_RETURN(std::optional<std::string> system, ReadSystem(body));
  auto messages_field = body.find("messages");
  if (messages_field == body.end()) return internal::MissingField("messages");
  TANDEM_ASSIGN_OR_RETURN(std::vector<internal::MessagesTurn> turns,
                          internal::ReadMessagesTurns(*messages_field));
  TANDEM_ASSIGN_OR_RETURN(std::vector<internal::MessagesToolDecl> tool_decls,
                          internal::ReadMessagesTools(body));
  TANDEM_ASSIGN_OR_RETURN(internal::ToolChoiceSpec choice,
                          internal::ReadMessagesToolChoice(body, tool_decls));

  ConversationRequest request;
  request.protocol = Protocol::kMessages;
  request.model = fields.model;
  request.stream = fields.stream;
  TANDEM_ASSIGN_OR_RETURN(request.model_version,
                          internal::ResolveModelVersion(fields.model, options));
  if (turns.empty()) return RequestError("messages: at least one message is required");

  Conversation& conversation = request.conversation;
  TANDEM_ASSIGN_OR_RETURN(std::vector<internal::ToolSpec> tool_specs,
                          internal::CheckMessagesTools(tool_decls, options));

  // An explicit thinking setting wins; otherwise an effort of "none" turns thinking off and any
  // other effort turns it on.
  if (fields.thinking) {
    conversation.thinking_mode = *fields.thinking != "disabled";
  } else if (fields.effort) {
    conversation.thinking_mode = *fields.effort != "none";
  } else {
    conversation.thinking_mode = options.default_thinking_mode;
  }
  if (conversation.thinking_mode) {
    // Thinking enabled explicitly with an effort of "none" keeps the default effort.
    std::string effort = fields.effort.value_or("high");
    TANDEM_ASSIGN_OR_RETURN(conversation.reasoning_effort,
                            internal::ParseEffortName(effort == "none" ? "high" : effort));
  }

  if (system) {
    Message message;
    message.role = Role::kSystem;
    message.content = *system;
    conversation.messages.push_back(std::move(message));
  }
  TANDEM_RETURN_IF_ERROR(
      internal::ConvertMessagesTurns(turns, options, request.model_version, conversation.messages));
  // A tool choice of "none" takes the tools out of play before their schemas are looked at.
  if (choice.mode != ToolChoice::kNone) {
    TANDEM_ASSIGN_OR_RETURN(conversation.tools, internal::BuildTools(std::move(tool_specs)));
  }
  TANDEM_RETURN_IF_ERROR(internal::ApplyToolChoice(choice, conversation));

  TANDEM_RETURN_IF_ERROR(internal::CheckSamplingRanges(fields.temperature, fields.top_p));
  const std::int64_t bound = conversation.thinking_mode
                                 ? options.thinking_max_tokens_upper_bound
                                 : options.non_thinking_max_tokens_upper_bound;
  if (fields.max_tokens && *fields.max_tokens < 1) {
    return RequestError(absl::StrCat(
        "Invalid max_tokens value, the valid range of max_tokens is [1, ", bound, "]"));
  }
  TANDEM_RETURN_IF_ERROR(internal::CheckStopSequences(fields.stop_sequences));

  TANDEM_RETURN_IF_ERROR(internal::ApplyReasoningContentBehavior(
      options, "The `content[].thinking` in the thinking mode must be passed back to the API.",
      conversation));

  InferenceOptions& inference = request.inference;
  if (fields.max_tokens) inference.max_tokens = std::min<std::int64_t>(*fields.max_tokens, bound);
  internal::ResolveSampling(request.model_version, conversation, fields.temperature, fields.top_p,
                            &inference);
  internal::FinishRequest(request, std::move(fields.stop_sequences));
  return request;
}

}  // namespace tandem::recipe
