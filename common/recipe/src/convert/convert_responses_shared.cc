#include "convert/convert_responses_shared.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "render/render_json.h"
#include "tandem/base/status_macros.h"
#include "tandem/recipe/errors.h"

namespace tandem::recipe::internal {
namespace {

bool Contains(std::initializer_list<absl::string_view> allowed, const std::string& name) {
  return std::find(allowed.begin(), allowed.end(), name) != allowed.end();
}

void AppendPythonJson(const Json& value, std::string& out) {
  if (value.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, item] : value.items()) {
      if (!first) out += ", ";
      first = false;
      AppendJson(Json(key), JsonStyle::kPrompt, &out);
      out += ": ";
      AppendPythonJson(item, out);
    }
    out += '}';
  } else if (value.is_array()) {
    out += '[';
    for (std::size_t i = 0; i < value.size(); ++i) {
      if (i > 0) out += ", ";
      AppendPythonJson(value[i], out);
    }
    out += ']';
  } else if (value.is_number_float()) {
    std::string number = FormatJsonFloat(value.get<double>());
    if (auto e = number.find('e'); e != std::string::npos && number[e + 1] != '-') {
      number.insert(e + 1, "+");
    }
    out += number;
  } else {
    AppendJson(value, JsonStyle::kPrompt, &out);
  }
}

// Strict mode's own rules, checked before normalisation; an object schema without properties
// gets an empty property list so that normalisation closes it too.
absl::Status PrepareStrictSchema(Json& schema) {
  if (!schema.is_object()) return absl::OkStatus();
  if (auto type = schema.find("type"); type != schema.end() && *type == "object") {
    if (auto extra = schema.find("additionalProperties"); extra != schema.end() && *extra == true) {
      return RequestError("additionalProperties should not be true");
    }
    if (!schema.contains("properties")) schema["properties"] = Json::object();
    if (auto required = schema.find("required"); required != schema.end()) {
      std::set<std::string> given, all;
      if (required->is_array()) {
        for (const Json& name : *required) {
          if (name.is_string()) given.insert(name.get<std::string>());
        }
      }
      if (schema["properties"].is_object()) {
        for (const auto& [key, unused] : schema["properties"].items()) all.insert(key);
      }
      if (given != all) {
        return RequestError("Required properties must match all properties in the object");
      }
    }
  }
  for (const char* key : {"properties", "$defs", "definitions"}) {
    if (auto it = schema.find(key); it != schema.end() && it->is_object()) {
      for (auto& [unused, sub] : it->items()) TANDEM_RETURN_IF_ERROR(PrepareStrictSchema(sub));
    }
  }
  if (auto it = schema.find("items"); it != schema.end()) {
    TANDEM_RETURN_IF_ERROR(PrepareStrictSchema(*it));
  }
  for (const char* key : {"anyOf", "allOf", "oneOf"}) {
    if (auto it = schema.find(key); it != schema.end() && it->is_array()) {
      for (auto& sub : *it) TANDEM_RETURN_IF_ERROR(PrepareStrictSchema(sub));
    }
  }
  return absl::OkStatus();
}

void CloseObjects(Json& schema) {
  if (!schema.is_object()) return;
  if (schema.contains("properties") && schema["properties"].is_object()) {
    Json required = Json::array();
    for (auto& [name, sub] : schema["properties"].items()) {
      required.push_back(name);
      CloseObjects(sub);
    }
    schema.erase("additionalProperties");
    schema.erase("required");
    schema["additionalProperties"] = false;
    schema["required"] = std::move(required);
  }
  if (auto it = schema.find("items"); it != schema.end()) CloseObjects(*it);
  for (const char* key : {"anyOf", "allOf", "oneOf"}) {
    if (auto it = schema.find(key); it != schema.end() && it->is_array()) {
      for (auto& sub : *it) CloseObjects(sub);
    }
  }
  for (const char* key : {"$defs", "definitions"}) {
    if (auto it = schema.find(key); it != schema.end() && it->is_object()) {
      for (auto& [unused, sub] : it->items()) CloseObjects(sub);
    }
  }
}

// A strict response schema may not leave an object's properties open-ended.
absl::Status CheckResponseObjectsHaveProperties(const Json& schema) {
  if (!schema.is_object()) return absl::OkStatus();
  if (auto type = schema.find("type");
      type != schema.end() && *type == "object" && !schema.contains("properties")) {
    return RequestError("An object with no properties is not allowed.");
  }
  for (const char* key : {"properties", "$defs", "definitions"}) {
    if (auto it = schema.find(key); it != schema.end() && it->is_object()) {
      for (const auto& [unused, sub] : it->items()) {
        TANDEM_RETURN_IF_ERROR(CheckResponseObjectsHaveProperties(sub));
      }
    }
  }
  if (auto it = schema.find("items"); it != schema.end()) {
    TANDEM_RETURN_IF_ERROR(CheckResponseObjectsHaveProperties(*it));
  }
  return absl::OkStatus();
}

bool IsSchemaTypeName(const Json& value) {
  static const std::set<std::string> kTypes = {"array",  "boolean", "integer", "null",
                                               "number", "object",  "string"};
  return value.is_string() && kTypes.count(value.get<std::string>()) > 0;
}

}  // namespace

absl::StatusOr<std::optional<std::string>> ReadVariant(
    const Json& object, const char* key, std::initializer_list<absl::string_view> allowed) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return InvalidType(*it, "string or map");
  std::string name = it->get<std::string>();
  if (!Contains(allowed, name)) return UnknownVariant(name, allowed);
  return std::optional<std::string>(std::move(name));
}

absl::StatusOr<std::string> RequireTag(const Json& object,
                                       std::initializer_list<absl::string_view> allowed) {
  TANDEM_ASSIGN_OR_RETURN(std::string name, RequireString(object, "type"));
  if (!Contains(allowed, name)) return UnknownVariant(name, allowed);
  return name;
}

absl::Status CheckSamplingRanges(std::optional<double> temperature, std::optional<double> top_p) {
  if (temperature && !(*temperature >= 0.0 && *temperature <= 2.0)) {
    return RequestError("Invalid temperature value, the valid range of temperature is [0, 2]");
  }
  if (top_p && !(*top_p > 0.0 && *top_p <= 1.0)) {
    return RequestError("Invalid top_p value, the valid range of top_p is (0, 1.0]");
  }
  return absl::OkStatus();
}

double FloatAsShortestDouble(double value) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), static_cast<float>(value));
  if (ec != std::errc()) return value;
  double result = value;
  std::from_chars(buffer, end, result);
  return result;
}

absl::StatusOr<const Json*> ReadObject(const Json& object, const char* key,
                                       absl::string_view expected) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return static_cast<const Json*>(nullptr);
  if (!it->is_object()) return InvalidType(*it, expected);
  return &*it;
}

absl::StatusOr<std::optional<std::uint32_t>> ReadU32(const Json& object, const char* key) {
  TANDEM_ASSIGN_OR_RETURN(std::optional<std::uint64_t> value,
                          ReadUnsigned(object, key, "u32", 0xffffffffULL));
  if (!value) return std::optional<std::uint32_t>();
  return std::optional<std::uint32_t>(static_cast<std::uint32_t>(*value));
}

absl::StatusOr<std::vector<ToolDefinition>> BuildTools(std::vector<ToolSpec> specs) {
  std::set<std::string> names;
  for (const ToolSpec& spec : specs) {
    if (!names.insert(spec.name).second) return RequestError("Tool names must be unique.");
  }
  std::vector<ToolDefinition> tools;
  for (ToolSpec& spec : specs) {
    if (spec.fixed) {
      tools.push_back(std::move(*spec.fixed));
      continue;
    }
    auto invalid = [&](absl::string_view detail) {
      return RequestError(absl::StrCat("Invalid schema for function '", spec.name, "': ", detail));
    };
    // Checked here so that errors carry the model-facing name (a namespace member's differs from
    // the declared one ConvertFunctionTool sees).
    if (spec.parameters) {
      if (auto error = MetaSchemaError(*spec.parameters)) return invalid(*error);
      const Json* type = spec.parameters->is_object() && spec.parameters->contains("type")
                             ? &(*spec.parameters)["type"]
                             : nullptr;
      if (type == nullptr || *type != "object") {
        return invalid(
            absl::StrCat("schema must be a JSON Schema of 'type: \"object\"', got 'type: ",
                         type ? ToJson(*type, JsonStyle::kCompact) : "null", "'."));
      }
    }
    TANDEM_ASSIGN_OR_RETURN(ToolDefinition tool,
                            ConvertFunctionTool(spec.local_name, std::move(spec.description),
                                                std::move(spec.parameters), spec.strict, "name"));
    tool.name = spec.name;
    tools.push_back(std::move(tool));
  }
  TANDEM_RETURN_IF_ERROR(CheckStrictNotMixed(tools));
  return tools;
}

absl::Status NormalizeStrictSchema(Json& schema) {
  TANDEM_RETURN_IF_ERROR(CheckResponseObjectsHaveProperties(schema));
  TANDEM_RETURN_IF_ERROR(PrepareStrictSchema(schema));
  CloseObjects(schema);
  return absl::OkStatus();
}

std::optional<std::string> MetaSchemaError(const Json& schema) {
  if (!schema.is_object() && !schema.is_boolean()) {
    return absl::StrCat(ToJson(schema, JsonStyle::kCompact),
                        " is not of types \"boolean\", \"object\"");
  }
  if (!schema.is_object()) return std::nullopt;
  if (auto type = schema.find("type"); type != schema.end()) {
    bool valid = IsSchemaTypeName(*type);
    if (type->is_array()) valid = std::all_of(type->begin(), type->end(), IsSchemaTypeName);
    if (!valid) {
      return absl::StrCat(ToJson(*type, JsonStyle::kCompact),
                          " is not valid under any of the schemas listed in the 'anyOf' keyword");
    }
  }
  for (const char* key : {"properties", "$defs", "definitions", "patternProperties"}) {
    auto it = schema.find(key);
    if (it == schema.end()) continue;
    if (!it->is_object()) {
      return absl::StrCat(ToJson(*it, JsonStyle::kCompact), " is not of type \"object\"");
    }
    for (const auto& [unused, sub] : it->items()) {
      if (auto error = MetaSchemaError(sub)) return error;
    }
  }
  if (auto it = schema.find("required"); it != schema.end() && !it->is_array()) {
    return absl::StrCat(ToJson(*it, JsonStyle::kCompact), " is not of type \"array\"");
  }
  for (const char* key : {"items", "additionalProperties", "not"}) {
    if (auto it = schema.find(key); it != schema.end()) {
      if (auto error = MetaSchemaError(*it)) return error;
    }
  }
  for (const char* key : {"anyOf", "allOf", "oneOf"}) {
    if (auto it = schema.find(key); it != schema.end() && it->is_array()) {
      for (const auto& sub : *it) {
        if (auto error = MetaSchemaError(sub)) return error;
      }
    }
  }
  return std::nullopt;
}

absl::Status ApplyToolChoice(const ToolChoiceSpec& choice, Conversation& conversation) {
  if (choice.mode == ToolChoice::kNone) {
    conversation.tools.clear();
    conversation.tool_choice = ToolChoice::kNone;
    return absl::OkStatus();
  }
  if (conversation.tools.empty()) return absl::OkStatus();
  if (choice.function) {
    auto it = std::find_if(conversation.tools.begin(), conversation.tools.end(),
                           [&](const ToolDefinition& t) { return t.name == *choice.function; });
    if (it == conversation.tools.end()) {
      return RequestError(absl::StrCat("Invalid value for 'tool_call': no function named '",
                                       *choice.function,
                                       "' was specified in the 'tools' parameter."));
    }
    if (conversation.thinking_mode) {
      return RequestError("Thinking mode does not support this tool_choice");
    }
    ToolDefinition kept = std::move(*it);
    conversation.tools.clear();
    conversation.tools.push_back(std::move(kept));
    conversation.tool_choice = ToolChoice::kRequired;
    return absl::OkStatus();
  }
  if (choice.mode == ToolChoice::kRequired && conversation.thinking_mode) {
    return RequestError("Thinking mode does not support this tool_choice");
  }
  conversation.tool_choice = choice.mode;
  return absl::OkStatus();
}

absl::Status ApplyReasoningContentBehavior(const ConversionOptions& options,
                                           absl::string_view reject_message,
                                           Conversation& conversation) {
  auto& messages = conversation.messages;
  if (!conversation.thinking_mode) {
    for (Message& message : messages) message.reasoning_content.reset();
    return absl::OkStatus();
  }
  std::size_t turn_start = 0;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role == Role::kUser) turn_start = i + 1;
  }
  // Only a turn that called tools continues its reasoning; there it must come back.
  const bool turn_called_tools =
      std::any_of(messages.begin() + turn_start, messages.end(),
                  [](const Message& m) { return m.role == Role::kTool; });
  for (std::size_t i = 0; i < messages.size(); ++i) {
    Message& message = messages[i];
    if (message.role != Role::kAssistant || message.reasoning_content) continue;
    if (options.reasoning_content_behavior == ReasoningContentBehavior::kReject &&
        turn_called_tools && i >= turn_start) {
      return RequestError(reject_message);
    }
    message.reasoning_content = "";
  }
  return absl::OkStatus();
}

absl::Status CheckStopSequences(const std::vector<std::string>& stops) {
  for (std::size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty()) {
      return RequestError(absl::StrCat(
          "Invalid 'stop[", i,
          "]': empty string. Expected a string with minimum length 1, but got an empty string "
          "instead."));
    }
  }
  return absl::OkStatus();
}

std::optional<ImageSource::Kind> ImageUrlKind(absl::string_view url) {
  if (absl::StartsWithIgnoreCase(url, "http:") || absl::StartsWithIgnoreCase(url, "https:")) {
    return ImageSource::Kind::kUrl;
  }
  if (absl::StartsWith(url, "data:") && absl::StrContains(url, ";base64,")) {
    return ImageSource::Kind::kDataUrl;
  }
  return std::nullopt;
}

std::string PythonStyleJson(const Json& value) {
  std::string out;
  AppendPythonJson(value, out);
  return out;
}

void FinishRequest(ConversationRequest& request, std::vector<std::string> stop_sequences) {
  request.inference.output_constraint = OutputConstraintFor(request.conversation);
  request.parsing = ParsingOptionsFor(request.conversation, std::move(stop_sequences));
}

}  // namespace tandem::recipe::internal
