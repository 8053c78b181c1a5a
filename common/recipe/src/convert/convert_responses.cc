// OpenAI Responses request -> ConversationRequest, matching deepseek-recipe's ResponsesRequest:
// shape errors first (as its schema deserialization reports them), then the semantic checks in
// its order: model, tool declarations, input, tool schemas and choice, response format, sampling,
// output limit.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "convert/convert_responses_internal.h"
#include "render/render_json.h"
#include "tandem/base/status_macros.h"
#include "tandem/recipe/convert.h"

namespace tandem::recipe {
namespace {

using internal::Json;

struct TextFormat {
  std::string type = "text";
  std::optional<Json> schema;
  std::optional<bool> strict;
  Json echo = Json{{"type", "text"}};
};

// The request fields other than input and tools, read with the schema's type rules.
struct ResponsesFields {
  std::string model;
  std::optional<std::string> instructions;
  std::optional<std::string> effort;
  std::optional<std::string> summary;
  TextFormat format;
  std::optional<std::string> verbosity;
  std::optional<std::uint32_t> max_output_tokens;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<std::uint32_t> top_logprobs;
  std::optional<std::string> user;
  bool stream = false;
};

absl::StatusOr<TextFormat> ReadTextFormat(const Json& format) {
  if (!format.is_object())
    return internal::InvalidType(format, "internally tagged enum ResponsesTextFormat");
  TextFormat result;
  TANDEM_ASSIGN_OR_RETURN(result.type,
                          internal::RequireTag(format, {"text", "json_schema", "json_object"}));
  result.echo = Json{{"type", result.type}};
  if (result.type != "json_schema") return result;
  TANDEM_ASSIGN_OR_RETURN(std::string name, internal::RequireString(format, "name"));
  auto schema = format.find("schema");
  if (schema == format.end()) return internal::MissingField("schema");
  result.schema = *schema;
  TANDEM_ASSIGN_OR_RETURN(std::optional<std::string> description,
                          internal::ReadString(format, "description"));
  TANDEM_ASSIGN_OR_RETURN(result.strict, internal::ReadBool(format, "strict"));
  result.echo["name"] = name;
  result.echo["schema"] = *schema;
  result.echo["description"] = description ? Json(*description) : Json();
  result.echo["strict"] = result.strict ? Json(*result.strict) : Json();
  return result;
}

absl::StatusOr<ResponsesFields> ReadFields(const Json& body) {
  ResponsesFields fields;
  TANDEM_ASSIGN_OR_RETURN(fields.model, internal::RequireString(body, "model"));
  TANDEM_ASSIGN_OR_RETURN(fields.instructions, internal::ReadString(body, "instructions"));
  TANDEM_ASSIGN_OR_RETURN(const Json* reasoning,
                          internal::ReadObject(body, "reasoning", "struct ResponsesReasoning"));
  if (reasoning) {
    TANDEM_ASSIGN_OR_RETURN(fields.effort,
                            internal::ReadVariant(*reasoning, "effort", internal::kEffortVariants));
    TANDEM_ASSIGN_OR_RETURN(fields.summary, internal::ReadVariant(*reasoning, "summary",
                                                                  {"auto", "concise", "detailed"}));
  }
  TANDEM_ASSIGN_OR_RETURN(const Json* text,
                          internal::ReadObject(body, "text", "struct ResponsesText"));
  if (text) {
    if (auto format = text->find("format"); format != text->end() && !format->is_null()) {
      TANDEM_ASSIGN_OR_RETURN(fields.format, ReadTextFormat(*format));
    }
    TANDEM_ASSIGN_OR_RETURN(fields.verbosity,
                            internal::ReadVariant(*text, "verbosity", {"low", "medium", "high"}));
  }
  TANDEM_ASSIGN_OR_RETURN(fields.max_output_tokens, internal::ReadU32(body, "max_output_tokens"));
  TANDEM_ASSIGN_OR_RETURN(fields.temperature, internal::ReadF32(body, "temperature"));
  TANDEM_ASSIGN_OR_RETURN(fields.top_p, internal::ReadF32(body, "top_p"));
  TANDEM_ASSIGN_OR_RETURN(fields.top_logprobs, internal::ReadU32(body, "top_logprobs"));
  TANDEM_ASSIGN_OR_RETURN(fields.user, internal::ReadString(body, "user"));
  TANDEM_ASSIGN_OR_RETURN(std::optional<bool> stream, internal::ReadBool(body, "stream"));
  fields.stream = stream.value_or(false);
  TANDEM_RETURN_IF_ERROR(internal::ReadBool(body, "parallel_tool_calls").status());
  return fields;
}

// What Responses response objects report about the request (the request's own values).
Json BuildEcho(const Json& body, const ResponsesFields& fields,
               const internal::ResponsesTools& tools) {
  auto optional_string = [](const std::optional<std::string>& s) { return s ? Json(*s) : Json(); };
  auto f32 = [](const std::optional<double>& v) {
    return Json(internal::FloatAsShortestDouble(v.value_or(1.0)));
  };
  Json echo;
  echo["instructions"] = optional_string(fields.instructions);
  echo["max_output_tokens"] = fields.max_output_tokens ? Json(*fields.max_output_tokens) : Json();
  echo["temperature"] = f32(fields.temperature);
  echo["top_p"] = f32(fields.top_p);
  echo["top_logprobs"] = fields.top_logprobs.value_or(0);
  echo["user"] = optional_string(fields.user);
  echo["reasoning"] = {{"effort", optional_string(fields.effort)},
                       {"summary", optional_string(fields.summary)}};
  echo["text"] = {{"format", fields.format.echo}, {"verbosity", optional_string(fields.verbosity)}};

  Json tool_choice = "auto";
  if (auto it = body.find("tool_choice"); it != body.end() && !it->is_null()) {
    tool_choice = it->is_string() ? *it : Json{{"type", (*it)["type"]}};
    if (it->is_object() && it->contains("name")) tool_choice["name"] = (*it)["name"];
  }
  echo["tool_choice"] = std::move(tool_choice);

  Json declared = Json::array();
  auto function_echo = [&](const Json& tool) {
    return Json{{"type", "function"},
                {"name", tool.value("name", Json())},
                {"description", tool.value("description", Json())},
                {"parameters", tool.value("parameters", Json())},
                {"strict", tool.value("strict", Json())}};
  };
  if (auto it = body.find("tools"); it != body.end() && it->is_array()) {
    for (const Json& tool : *it) {
      const std::string type = tool.value("type", "");
      if (type == "function") {
        declared.push_back(function_echo(tool));
      } else if (type == "namespace") {
        Json inner = Json::array();
        for (const Json& member : tool.value("tools", Json::array())) {
          inner.push_back(member.value("type", "") == "function"
                              ? function_echo(member)
                              : Json{{"type", "custom"}, {"name", member.value("name", Json())}});
        }
        declared.push_back({{"type", "namespace"},
                            {"name", tool.value("name", Json())},
                            {"description", tool.value("description", Json())},
                            {"tools", std::move(inner)}});
      } else if (type == "custom") {
        declared.push_back({{"type", "custom"}, {"name", tool.value("name", Json())}});
      } else if (type == "web_search" || type == "web_search_2025_08_26") {
        declared.push_back({{"type", type},
                            {"search_context_size", tool.value("search_context_size", Json())},
                            {"user_location", tool.value("user_location", Json())}});
      }
    }
  }
  echo["tools"] = std::move(declared);

  Json names = Json::object();
  for (const auto& [name, origin] : tools.namespace_tool_map) {
    names[name] = Json::array({origin.first, origin.second});
  }
  echo["namespace_tool_map"] = std::move(names);
  return echo;
}

}  // namespace

absl::StatusOr<ConversationRequest> ConvertResponses(const nlohmann::ordered_json& body,
                                                     const ConversionOptions& options) {
  if (!body.is_object()) return internal::InvalidType(body, "struct ResponsesRequest");
  TANDEM_ASSIGN_OR_RETURN(ResponsesFields fields, ReadFields(body));
  const Json* input = nullptr;
  if (auto it = body.find("input"); it != body.end() && !it->is_null()) {
    if (!it->is_string() && !it->is_array()) {
      return internal::BodyError("input should be a string or a list of input items");
    }
    input = &*it;
  }

  ConversationRequest request;
  request.protocol = Protocol::kResponses;
  request.model = fields.model;
  request.stream = fields.stream;
  TANDEM_ASSIGN_OR_RETURN(request.model_version,
                          internal::ResolveModelVersion(fields.model, options));
  TANDEM_ASSIGN_OR_RETURN(internal::ResponsesTools tools,
                          internal::ConvertResponsesTools(body, options, request.model_version));
  TANDEM_ASSIGN_OR_RETURN(internal::ToolChoiceSpec choice,
                          internal::ReadResponsesToolChoice(body, options));

  Conversation& conversation = request.conversation;
  conversation.thinking_mode =
      fields.effort ? *fields.effort != "none" : options.default_thinking_mode;
  if (conversation.thinking_mode) {
    TANDEM_ASSIGN_OR_RETURN(conversation.reasoning_effort,
                            internal::ParseEffortName(fields.effort.value_or("high")));
  }

  if (input == nullptr && !fields.instructions) {
    return RequestError("Either input or instructions must be provided");
  }
  if (fields.instructions && !fields.instructions->empty()) {
    Message system;
    system.role = Role::kSystem;
    system.content = *fields.instructions;
    conversation.messages.push_back(std::move(system));
  }
  if (input != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(std::vector<Message> messages,
                            internal::ConvertResponsesInput(*input, tools, request.model_version));
    for (Message& message : messages) conversation.messages.push_back(std::move(message));
  }

  // A tool choice of "none" takes the tools out of play before their schemas are looked at.
  if (choice.mode != ToolChoice::kNone) {
    TANDEM_ASSIGN_OR_RETURN(conversation.tools, internal::BuildTools(std::move(tools.specs)));
  }
  TANDEM_RETURN_IF_ERROR(internal::ApplyToolChoice(choice, conversation));

  std::optional<Json> strict_schema;
  if (fields.format.type == "json_object") {
    if (!internal::MentionsJson(conversation)) {
      return RequestError(
          "Response input messages must contain the word 'json' in some form to use "
          "'text.format' of type 'json_object'.");
    }
    conversation.response_format = ResponseFormat::kJsonObject;
  } else if (fields.format.type == "json_schema") {
    if (auto error = internal::MetaSchemaError(*fields.format.schema)) {
      return RequestError(absl::StrCat("Invalid json schema: ", *error));
    }
    conversation.response_format = ResponseFormat::kJsonSchema;
    conversation.response_schema = *fields.format.schema;
    if (fields.format.strict.value_or(false)) {
      strict_schema = *fields.format.schema;
      TANDEM_RETURN_IF_ERROR(internal::NormalizeStrictSchema(*strict_schema));
    }
  }

  // Strict tools are enforced by constrained decoding, which cannot also enforce a format.
  const bool strict_tools =
      std::any_of(conversation.tools.begin(), conversation.tools.end(),
                  [](const ToolDefinition& t) { return t.strict.value_or(false); });
  if (strict_tools && conversation.tool_choice != ToolChoice::kNone &&
      conversation.response_format != ResponseFormat::kText) {
    return RequestError("response_format should not be used with tools");
  }

  TANDEM_RETURN_IF_ERROR(internal::CheckSamplingRanges(fields.temperature, fields.top_p));
  if (fields.top_logprobs && *fields.top_logprobs > 20) {
    return RequestError("Invalid top_logprobs value, the valid range of top_logprobs is [0, 20].");
  }
  const std::int64_t bound = conversation.thinking_mode
                                 ? options.thinking_max_tokens_upper_bound
                                 : options.non_thinking_max_tokens_upper_bound;
  if (fields.max_output_tokens &&
      (*fields.max_output_tokens < 1 || *fields.max_output_tokens > bound)) {
    return RequestError(absl::StrCat(
        "Invalid max_tokens value, the valid range of max_tokens is [1, ", bound, "]"));
  }

  TANDEM_RETURN_IF_ERROR(internal::ApplyReasoningContentBehavior(
      options, "The `reasoning_text` in the thinking mode must be passed back to the API.",
      conversation));

  InferenceOptions& inference = request.inference;
  if (fields.max_output_tokens) inference.max_tokens = *fields.max_output_tokens;
  internal::ResolveSampling(request.model_version, conversation, fields.temperature, fields.top_p,
                            &inference);
  if (fields.top_logprobs) {
    inference.logprobs = true;
    inference.top_logprobs = static_cast<int>(*fields.top_logprobs);
  }
  internal::FinishRequest(request, {});
  if (strict_schema && !request.inference.output_constraint->kind.empty() &&
      request.inference.output_constraint->kind == "json") {
    // The constraint follows the strict (closed) schema; the conversation keeps the client's.
    request.inference.output_constraint->schema =
        internal::ToJson(*strict_schema, internal::JsonStyle::kCompact);
  }
  request.echo = BuildEcho(body, fields, tools);
  return request;
}

}  // namespace tandem::recipe
