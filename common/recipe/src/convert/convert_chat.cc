// OpenAI Chat Completions request -> ConversationRequest, accepting and rejecting what
// deepseek-recipe 0.2.0 does. Two phases like the reference: the body's shape is read first
// (serde-style "invalid request body: ..." errors), then its meaning is checked (OpenAI-style
// messages naming the field).
#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "convert/convert_common.h"
#include "tandem/base/status_macros.h"
#include "tandem/recipe/convert.h"
#include "tandem/recipe/errors.h"
#include "tandem/recipe/render.h"

namespace tandem::recipe {
namespace {

using internal::Json;

constexpr std::size_t kMaxStopSequences = 16;
constexpr std::uint64_t kU32Max = 0xFFFFFFFFull;
constexpr std::uint64_t kU64Max = ~0ull;
constexpr absl::string_view kUnsupportedImage = "[Unsupported Image]";

// A message as the body spells it, before the semantic checks.
struct ChatMessage {
  Role role = Role::kUser;
  std::optional<std::string> content;  // nullopt: absent or null (assistant only)
  std::vector<ImageSource> images;
  std::vector<std::size_t> image_offsets;
  std::optional<std::string> reasoning_content;
  std::optional<std::vector<ToolCall>> tool_calls;
  bool prefix = false;
  std::optional<std::string> tool_call_id;
};

absl::StatusOr<Role> ReadRole(const Json& message) {
  TANDEM_ASSIGN_OR_RETURN(std::string role, internal::RequireString(message, "role"));
  if (role == "system") return Role::kSystem;
  if (role == "user") return Role::kUser;
  if (role == "assistant") return Role::kAssistant;
  if (role == "tool") return Role::kTool;
  if (role == "latest_reminder") return Role::kLatestReminder;
  return internal::UnknownVariant(role, {"system", "user", "assistant", "tool", "latest_reminder"});
}

absl::StatusOr<ImageDetail> ReadDetail(const Json& image_url) {
  TANDEM_ASSIGN_OR_RETURN(std::optional<std::string> detail,
                          internal::ReadString(image_url, "detail"));
  if (!detail.has_value() || *detail == "auto") return ImageDetail::kHigh;
  if (*detail == "low") return ImageDetail::kLow;
  if (*detail == "high") return ImageDetail::kHigh;
  if (*detail == "original") return ImageDetail::kOriginal;
  return internal::UnknownVariant(*detail, {"low", "high", "auto", "original"});
}

// Text parts joined by a blank line; images become the image token (V4.1, which reads images) or
// a marker (V4, which cannot).
absl::Status ReadContent(const Json& content, ModelVersion version, std::size_t index,
                         ChatMessage* out) {
  if (content.is_string()) {
    out->content = content.get<std::string>();
    return absl::OkStatus();
  }
  if (!content.is_array()) return internal::BodyError("content should be a string or a list");
  std::vector<std::string> parts;
  std::size_t length = 0;  // of the joined text so far
  auto add = [&](std::string part) {
    if (!parts.empty()) length += 2;
    length += part.size();
    parts.push_back(std::move(part));
  };
  for (const Json& part : content) {
    if (!part.is_object()) return internal::InvalidType(part, "internally tagged enum");
    TANDEM_ASSIGN_OR_RETURN(std::string type, internal::RequireString(part, "type"));
    if (type == "text") {
      TANDEM_ASSIGN_OR_RETURN(std::string text, internal::RequireString(part, "text"));
      add(std::move(text));
    } else if (type == "image_url") {
      auto it = part.find("image_url");
      if (it == part.end()) return internal::MissingField("image_url");
      if (!it->is_object()) return internal::InvalidType(*it, "struct ImageUrl");
      TANDEM_ASSIGN_OR_RETURN(std::string url, internal::RequireString(*it, "url"));
      TANDEM_ASSIGN_OR_RETURN(ImageDetail detail, ReadDetail(*it));
      if (version == ModelVersion::kDeepseekV41) {
        ImageSource image;
        image.kind =
            url.rfind("data:", 0) == 0 ? ImageSource::Kind::kDataUrl : ImageSource::Kind::kUrl;
        image.data = std::move(url);
        image.detail = detail;
        image.path = absl::StrCat(".messages[", index, "]");
        out->images.push_back(std::move(image));
        out->image_offsets.push_back(parts.empty() ? 0 : length + 2);
        add(std::string(kImageToken));
      } else {
        add(std::string(kUnsupportedImage));
      }
    } else if (type == "file") {
      return RequestError("File content is not supported");
    } else {
      return internal::UnknownVariant(type, {"text", "image_url", "file"});
    }
  }
  out->content = absl::StrJoin(parts, "\n\n");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ToolCall>> ReadToolCalls(const Json& calls) {
  if (!calls.is_array()) return internal::InvalidType(calls, "a sequence");
  std::vector<ToolCall> out;
  for (const Json& call : calls) {
    if (!call.is_object()) return internal::InvalidType(call, "struct ChatCompletionToolCall");
    ToolCall tc;
    TANDEM_ASSIGN_OR_RETURN(tc.id, internal::RequireString(call, "id"));
    TANDEM_ASSIGN_OR_RETURN(std::string type, internal::RequireString(call, "type"));
    if (type != "function") return internal::UnknownVariant(type, {"function"});
    auto fn = call.find("function");
    if (fn == call.end()) return internal::MissingField("function");
    if (!fn->is_object()) return internal::InvalidType(*fn, "struct ChatCompletionFunctionCall");
    TANDEM_ASSIGN_OR_RETURN(tc.name, internal::RequireString(*fn, "name"));
    TANDEM_ASSIGN_OR_RETURN(tc.arguments, internal::RequireString(*fn, "arguments"));
    out.push_back(std::move(tc));
  }
  return out;
}

absl::StatusOr<ChatMessage> ReadMessage(const Json& message, ModelVersion version,
                                        std::size_t index) {
  if (!message.is_object()) return internal::InvalidType(message, "internally tagged enum");
  ChatMessage out;
  TANDEM_ASSIGN_OR_RETURN(out.role, ReadRole(message));
  auto content = message.find("content");
  if (out.role == Role::kAssistant) {
    if (content != message.end() && !content->is_null()) {
      TANDEM_RETURN_IF_ERROR(ReadContent(*content, version, index, &out));
    }
    TANDEM_ASSIGN_OR_RETURN(out.reasoning_content,
                            internal::ReadString(message, "reasoning_content"));
    auto calls = message.find("tool_calls");
    if (calls != message.end() && !calls->is_null()) {
      TANDEM_ASSIGN_OR_RETURN(out.tool_calls, ReadToolCalls(*calls));
    }
    TANDEM_ASSIGN_OR_RETURN(std::optional<bool> prefix, internal::ReadBool(message, "prefix"));
    out.prefix = prefix.value_or(false);
    return out;
  }
  if (content == message.end()) return internal::MissingField("content");
  TANDEM_RETURN_IF_ERROR(ReadContent(*content, version, index, &out));
  if (out.role == Role::kTool) {
    TANDEM_ASSIGN_OR_RETURN(std::string id, internal::RequireString(message, "tool_call_id"));
    out.tool_call_id = std::move(id);
  }
  return out;
}

// Tool results must answer, right after it, every call of the assistant message before them.
absl::Status CheckToolSequence(const std::vector<ChatMessage>& messages) {
  constexpr absl::string_view kInsufficient =
      "An assistant message with 'tool_calls' must be followed by tool messages responding to "
      "each 'tool_call_id'. (insufficient tool messages following tool_calls message)";
  std::vector<bool> answered(messages.size(), false);
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == Role::kTool && !answered[i]) {
      return RequestError(
          "Messages with role 'tool' must be a response to a preceding message with "
          "'tool_calls'");
    }
    if (m.role != Role::kAssistant || !m.tool_calls.has_value()) continue;
    const std::vector<ToolCall>& calls = *m.tool_calls;
    std::set<std::string> ids;
    for (const ToolCall& call : calls) {
      if (!ids.insert(call.id).second) {
        return RequestError(absl::StrCat("Duplicate value for 'tool_call_id' of ", call.id,
                                         " in message[", i, "]"));
      }
    }
    if (i + calls.size() >= messages.size()) return RequestError(kInsufficient);
    std::set<std::string> seen;
    for (std::size_t j = i + 1; j <= i + calls.size(); ++j) {
      if (messages[j].role != Role::kTool) return RequestError(kInsufficient);
    }
    for (std::size_t j = i + 1; j <= i + calls.size(); ++j) {
      const std::string& id = *messages[j].tool_call_id;
      if (!seen.insert(id).second) {
        return RequestError(
            absl::StrCat("Duplicate value for 'tool_call_id' of ", id, " in message[", j, "]"));
      }
      if (ids.count(id) == 0) {
        return RequestError(absl::StrCat(
            "An assistant message with 'tool_calls' must be followed by tool messages responding "
            "to each 'tool_call_id', The following tool_call_ids did not have response messages: ",
            id));
      }
      answered[j] = true;
    }
  }
  return absl::OkStatus();
}

absl::Status CheckAssistant(const ChatMessage& m, std::size_t index) {
  if (!m.content.has_value() && !m.tool_calls.has_value()) {
    return RequestError("Invalid assistant message: content or tool_calls must be set");
  }
  if (m.tool_calls.has_value() && m.tool_calls->empty()) {
    return RequestError(absl::StrCat("Invalid 'messages[", index,
                                     "].tool_calls': empty array. Expected an array with minimum "
                                     "length 1, but got an empty array instead."));
  }
  if (!m.images.empty()) return RequestError("Image in assistant message is not supported");
  return absl::OkStatus();
}

// Prefix continuation: only on the final assistant message...
absl::Status CheckPrefixIsFinal(const std::vector<ChatMessage>& messages) {
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.prefix && (i + 1 != messages.size() || m.tool_calls.has_value())) {
      return RequestError(
          "Invalid completion message: prefix set true with message which is not final message "
          "or message role is not assistant");
    }
  }
  return absl::OkStatus();
}

// ...and with neither JSON mode nor tools (declared, even with tool_choice "none").
absl::Status CheckPrefixUse(const std::vector<ChatMessage>& messages, const Conversation& c,
                            bool tools_declared) {
  if (messages.empty() || !messages.back().prefix) return absl::OkStatus();
  if (c.response_format == ResponseFormat::kJsonObject) {
    return RequestError("response_format json_object should not be used with prefix");
  }
  if (tools_declared) return RequestError("Function call should not be used with prefix");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ReadStop(const Json& body) {
  std::vector<std::string> stops;
  auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return stops;
  auto empty_error = [](absl::string_view field) {
    return RequestError(absl::StrCat("Invalid '", field,
                                     "': empty string. Expected a string with minimum length 1, "
                                     "but got an empty string instead."));
  };
  if (it->is_string()) {
    if (it->get_ref<const std::string&>().empty()) return empty_error("stop");
    stops.push_back(it->get<std::string>());
    return stops;
  }
  if (!it->is_array()) return internal::InvalidType(*it, "a string or a list of strings");
  for (const Json& s : *it) {
    if (!s.is_string()) return internal::InvalidType(s, "a string");
    stops.push_back(s.get<std::string>());
  }
  if (stops.size() > kMaxStopSequences) {
    return RequestError(absl::StrCat("Stop string array too long: ", stops.size()));
  }
  for (std::size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty()) return empty_error(absl::StrCat("stop[", i, "]"));
  }
  return stops;
}

struct ToolChoiceSpec {
  ToolChoice choice = ToolChoice::kAuto;
  std::optional<std::string> function;  // a named function
};

absl::StatusOr<ToolChoiceSpec> ReadToolChoice(const Json& body) {
  ToolChoiceSpec spec;
  auto it = body.find("tool_choice");
  if (it == body.end() || it->is_null()) return spec;
  constexpr absl::string_view kExpected = "expected one of `none`, `auto`, `required` or a tool";
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    if (s == "none")
      spec.choice = ToolChoice::kNone;
    else if (s == "auto")
      spec.choice = ToolChoice::kAuto;
    else if (s == "required")
      spec.choice = ToolChoice::kRequired;
    else
      return internal::BodyError(kExpected);
    return spec;
  }
  if (!it->is_object()) return internal::BodyError(kExpected);
  auto fn = it->find("function");
  if (fn == it->end() || !fn->is_object()) return internal::BodyError(kExpected);
  TANDEM_ASSIGN_OR_RETURN(std::string name, internal::RequireString(*fn, "name"));
  spec.choice = ToolChoice::kRequired;
  spec.function = std::move(name);
  return spec;
}

struct RawTool {
  std::string name;
  std::optional<std::string> description;
  std::optional<Json> parameters;
  std::optional<bool> strict;
};

absl::StatusOr<std::vector<RawTool>> ReadTools(const Json& body) {
  std::vector<RawTool> raw;
  auto it = body.find("tools");
  if (it == body.end() || it->is_null()) return raw;
  if (!it->is_array()) return internal::InvalidType(*it, "a sequence");
  for (const Json& tool : *it) {
    if (!tool.is_object()) return internal::InvalidType(tool, "internally tagged enum");
    TANDEM_ASSIGN_OR_RETURN(std::string type, internal::RequireString(tool, "type"));
    if (type != "function") return internal::UnknownVariant(type, {"function"});
    auto fn = tool.find("function");
    if (fn == tool.end()) return internal::MissingField("function");
    if (!fn->is_object()) return internal::InvalidType(*fn, "struct FunctionDefinition");
    RawTool r;
    TANDEM_ASSIGN_OR_RETURN(r.name, internal::RequireString(*fn, "name"));
    TANDEM_ASSIGN_OR_RETURN(r.description, internal::ReadString(*fn, "description"));
    auto params = fn->find("parameters");
    if (params != fn->end() && !params->is_null()) r.parameters = *params;
    TANDEM_ASSIGN_OR_RETURN(r.strict, internal::ReadBool(*fn, "strict"));
    raw.push_back(std::move(r));
  }
  return raw;
}

std::string ToolNamePath(std::size_t i) { return absl::StrCat("tools[", i, "].function.name"); }

// Names are checked even for tool_choice "none"; schemas only for tools that stay in play.
absl::StatusOr<std::vector<ToolDefinition>> ConvertTools(const std::vector<RawTool>& raw,
                                                         bool in_play) {
  std::vector<ToolDefinition> tools;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    TANDEM_RETURN_IF_ERROR(internal::CheckToolName(raw[i].name, ToolNamePath(i)));
  }
  if (!in_play) return tools;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    TANDEM_ASSIGN_OR_RETURN(
        ToolDefinition tool,
        internal::ConvertFunctionTool(raw[i].name, raw[i].description, raw[i].parameters,
                                      raw[i].strict, ToolNamePath(i)));
    tools.push_back(std::move(tool));
  }
  TANDEM_RETURN_IF_ERROR(internal::CheckUniqueToolNames(tools));
  return tools;
}

absl::StatusOr<bool> ReadThinking(const Json& body, const ConversionOptions& options,
                                  bool effort_none) {
  auto it = body.find("thinking");
  if (it == body.end() || it->is_null()) return effort_none ? false : options.default_thinking_mode;
  if (!it->is_object()) return internal::InvalidType(*it, "struct ChatCompletionThinking");
  TANDEM_ASSIGN_OR_RETURN(std::string type, internal::RequireString(*it, "type"));
  if (type == "enabled" || type == "adaptive") return true;
  if (type == "disabled") return false;
  return internal::UnknownVariant(type, {"adaptive", "enabled", "disabled"});
}

absl::Status ApplyResponseFormat(const Json& body, Conversation* conversation) {
  auto it = body.find("response_format");
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) return internal::InvalidType(*it, "internally tagged enum ResponseFormat");
  TANDEM_ASSIGN_OR_RETURN(std::string type, internal::RequireString(*it, "type"));
  if (type == "text") return absl::OkStatus();
  if (type == "json_object") {
    conversation->response_format = ResponseFormat::kJsonObject;
    return absl::OkStatus();
  }
  if (type == "json_schema") {
    auto schema = it->find("json_schema");
    if (schema == it->end()) return internal::MissingField("json_schema");
    if (!schema->is_object()) return internal::InvalidType(*schema, "struct JsonSchema");
    auto inner = schema->find("schema");
    if (inner == schema->end()) return internal::MissingField("schema");
    conversation->response_format = ResponseFormat::kJsonSchema;
    conversation->response_schema = *inner;
    return absl::OkStatus();
  }
  if (type == "regex") {
    TANDEM_ASSIGN_OR_RETURN(std::string regex, internal::RequireString(*it, "regex"));
    conversation->response_format = ResponseFormat::kRegex;
    conversation->response_regex = std::move(regex);
    return absl::OkStatus();
  }
  return internal::UnknownVariant(type, {"text", "json_object", "json_schema", "regex"});
}

}  // namespace

absl::StatusOr<ConversationRequest> ConvertChatCompletions(const nlohmann::ordered_json& body,
                                                           const ConversionOptions& options) {
  if (!body.is_object()) return internal::InvalidType(body, "struct ChatCompletionRequest");
  ConversationRequest request;
  request.protocol = Protocol::kChatCompletions;
  // Shape.
  TANDEM_ASSIGN_OR_RETURN(request.model, internal::RequireString(body, "model"));
  auto messages_it = body.find("messages");
  if (messages_it == body.end()) return internal::MissingField("messages");
  if (!messages_it->is_array()) return internal::InvalidType(*messages_it, "a sequence");
  // The model decides how images are read, so resolve it before the messages (its error is
  // reported after shape errors, below).
  absl::StatusOr<ModelVersion> version = internal::ResolveModelVersion(request.model, options);
  const ModelVersion read_as = version.ok() ? *version : ModelVersion::kDeepseekV4;
  std::vector<ChatMessage> messages;
  for (std::size_t i = 0; i < messages_it->size(); ++i) {
    TANDEM_ASSIGN_OR_RETURN(ChatMessage m, ReadMessage((*messages_it)[i], read_as, i));
    messages.push_back(std::move(m));
  }
  TANDEM_ASSIGN_OR_RETURN(std::optional<double> temperature,
                          internal::ReadF32(body, "temperature"));
  TANDEM_ASSIGN_OR_RETURN(std::optional<double> top_p, internal::ReadF32(body, "top_p"));
  TANDEM_ASSIGN_OR_RETURN(std::optional<std::uint64_t> max_tokens,
                          internal::ReadUnsigned(body, "max_tokens", "u32", kU32Max));
  TANDEM_ASSIGN_OR_RETURN(std::optional<std::uint64_t> n,
                          internal::ReadUnsigned(body, "n", "u32", kU32Max));
  TANDEM_ASSIGN_OR_RETURN(std::optional<std::uint64_t> seed,
                          internal::ReadUnsigned(body, "seed", "u64", kU64Max));
  TANDEM_ASSIGN_OR_RETURN(std::optional<bool> logprobs, internal::ReadBool(body, "logprobs"));
  TANDEM_ASSIGN_OR_RETURN(std::optional<std::uint64_t> top_logprobs,
                          internal::ReadUnsigned(body, "top_logprobs", "u32", kU32Max));
  TANDEM_ASSIGN_OR_RETURN(std::optional<bool> stream, internal::ReadBool(body, "stream"));
  auto stream_options = body.find("stream_options");
  if (stream_options != body.end() && stream_options->is_object()) {
    TANDEM_ASSIGN_OR_RETURN(std::optional<bool> usage,
                            internal::ReadBool(*stream_options, "include_usage"));
    request.include_usage = usage.value_or(false);
  }
  TANDEM_ASSIGN_OR_RETURN(std::optional<std::string> effort_name,
                          internal::ReadString(body, "reasoning_effort"));
  std::optional<ReasoningEffort> effort;
  if (effort_name.has_value()) {
    TANDEM_ASSIGN_OR_RETURN(effort, internal::ParseEffortName(*effort_name));
  }
  const bool effort_none = effort_name.has_value() && !effort.has_value();
  TANDEM_ASSIGN_OR_RETURN(bool thinking, ReadThinking(body, options, effort_none));
  TANDEM_ASSIGN_OR_RETURN(ToolChoiceSpec tool_choice, ReadToolChoice(body));
  TANDEM_ASSIGN_OR_RETURN(std::vector<RawTool> raw_tools, ReadTools(body));
  Conversation& conversation = request.conversation;
  TANDEM_RETURN_IF_ERROR(ApplyResponseFormat(body, &conversation));

  // Meaning, in the order the reference checks it (the first problem is the one reported).
  if (!version.ok()) return version.status();
  request.model_version = *version;
  if (messages.empty()) return RequestError("Empty input messages");
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role == Role::kAssistant) {
      TANDEM_RETURN_IF_ERROR(CheckAssistant(messages[i], i));
    }
  }
  TANDEM_RETURN_IF_ERROR(CheckToolSequence(messages));
  TANDEM_RETURN_IF_ERROR(CheckPrefixIsFinal(messages));
  const bool tools_in_play = tool_choice.choice != ToolChoice::kNone;
  TANDEM_ASSIGN_OR_RETURN(std::vector<ToolDefinition> tools,
                          ConvertTools(raw_tools, tools_in_play));
  conversation.thinking_mode = thinking;
  if (thinking) conversation.reasoning_effort = effort.value_or(ReasoningEffort::kHigh);
  if (!tools_in_play) {
    conversation.tool_choice = ToolChoice::kNone;
  } else if (tools.empty()) {
    if (tool_choice.function.has_value()) {
      return RequestError(absl::StrCat("Invalid value for 'tool_call': no function named '",
                                       *tool_choice.function,
                                       "' was specified in the 'tools' parameter."));
    }
    conversation.tool_choice = ToolChoice::kAuto;
  } else {
    if (tool_choice.function.has_value()) {
      std::vector<ToolDefinition> named;
      for (ToolDefinition& t : tools) {
        if (t.name == *tool_choice.function) named.push_back(std::move(t));
      }
      if (named.empty()) {
        return RequestError(absl::StrCat("Invalid value for 'tool_call': no function named '",
                                         *tool_choice.function,
                                         "' was specified in the 'tools' parameter."));
      }
      tools = std::move(named);
    }
    if (tool_choice.choice == ToolChoice::kRequired && thinking) {
      return RequestError("Thinking mode does not support this tool_choice");
    }
    conversation.tool_choice = tool_choice.choice;
    conversation.tools = std::move(tools);
  }
  TANDEM_RETURN_IF_ERROR(CheckPrefixUse(messages, conversation, !raw_tools.empty()));
  TANDEM_ASSIGN_OR_RETURN(std::vector<std::string> stops, ReadStop(body));
  TANDEM_RETURN_IF_ERROR(internal::CheckStrictNotMixed(conversation.tools));
  if (conversation.response_format == ResponseFormat::kJsonObject &&
      !std::any_of(messages.begin(), messages.end(), [](const ChatMessage& m) {
        return absl::StrContains(absl::AsciiStrToLower(m.content.value_or("")), "json");
      })) {
    return RequestError(
        "Prompt must contain the word 'json' in some form to use 'response_format' of type "
        "'json_object'.");
  }
  const bool strict_tools =
      std::any_of(conversation.tools.begin(), conversation.tools.end(),
                  [](const ToolDefinition& t) { return t.strict.value_or(false); });
  if (strict_tools && conversation.response_format != ResponseFormat::kText) {
    return RequestError("response_format should not be used with tools");
  }
  if (n.has_value() && *n != 1) {
    return RequestError("Invalid n value (currently only n = 1 is supported)");
  }
  const std::int64_t max_bound = thinking ? options.thinking_max_tokens_upper_bound
                                          : options.non_thinking_max_tokens_upper_bound;
  if (max_tokens.has_value() &&
      (*max_tokens < 1 || static_cast<std::int64_t>(*max_tokens) > max_bound)) {
    return RequestError(absl::StrCat(
        "Invalid max_tokens value, the valid range of max_tokens is [1, ", max_bound, "]"));
  }
  if (temperature.has_value() && (*temperature < 0 || *temperature > 2)) {
    return RequestError("Invalid temperature value, the valid range of temperature is [0, 2]");
  }
  if (top_p.has_value() && (*top_p <= 0 || *top_p > 1)) {
    return RequestError("Invalid top_p value, the valid range of top_p is (0, 1.0]");
  }
  if (top_logprobs.has_value() && !logprobs.value_or(false)) {
    return RequestError(
        "Invalid top_logprobs and logprobs value, logprobs must be set to true if top_logprobs is "
        "used.");
  }
  if (top_logprobs.has_value() && *top_logprobs > 20) {
    return RequestError("Invalid top_logprobs value, the valid range of top_logprobs is [0, 20].");
  }

  for (std::size_t i = 0; i < messages.size(); ++i) {
    ChatMessage& cm = messages[i];
    // An empty system message says nothing; the reference drops it.
    if (cm.role == Role::kSystem && cm.content.value_or("").empty()) continue;
    Message m;
    m.role = cm.role;
    m.content = cm.content.value_or("");
    m.image_sources = std::move(cm.images);
    m.image_offsets = std::move(cm.image_offsets);
    if (cm.role == Role::kAssistant) {
      if (thinking) {
        if (!cm.reasoning_content.has_value() &&
            options.reasoning_content_behavior == ReasoningContentBehavior::kReject) {
          return RequestError(
              absl::StrCat("Missing `reasoning_content` field in the assistant "
                           "message at message index ",
                           i));
        }
        m.reasoning_content = cm.reasoning_content.value_or("");
      }
      m.tool_calls = std::move(cm.tool_calls);
      m.prefix = cm.prefix;
    }
    m.tool_call_id = std::move(cm.tool_call_id);
    conversation.messages.push_back(std::move(m));
  }

  InferenceOptions& inference = request.inference;
  if (max_tokens.has_value()) inference.max_tokens = static_cast<std::int64_t>(*max_tokens);
  internal::ResolveSampling(request.model_version, conversation, temperature, top_p, &inference);
  inference.logprobs = logprobs.value_or(false);
  if (top_logprobs.has_value()) inference.top_logprobs = static_cast<int>(*top_logprobs);
  inference.seed = seed;
  inference.output_constraint = internal::OutputConstraintFor(conversation);
  request.parsing = internal::ParsingOptionsFor(conversation, std::move(stops));
  request.stream = stream.value_or(false);
  return request;
}

}  // namespace tandem::recipe
