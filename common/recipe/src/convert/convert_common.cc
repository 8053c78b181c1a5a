#include "convert/convert_common.h"

#include <algorithm>
#include <limits>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "render/render_json.h"
#include "tandem/recipe/errors.h"

namespace tandem::recipe::internal {
namespace {

double AsF32(double v) { return static_cast<double>(static_cast<float>(v)); }

bool IsToolNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

bool IsSchemaTypeName(const Json& v) {
  static constexpr absl::string_view kTypes[] = {"array",  "boolean", "integer", "null",
                                                 "number", "object",  "string"};
  if (!v.is_string()) return false;
  const std::string& s = v.get_ref<const std::string&>();
  return std::find(std::begin(kTypes), std::end(kTypes), s) != std::end(kTypes);
}

// The JSON Schema meta-schema checks a client is most likely to trip: every schema is an object
// or a boolean, and every "type" is a type name or a list of them.
absl::Status CheckSchemaShape(const Json& schema, const std::string& tool) {
  auto fail = [&](absl::string_view detail) {
    return RequestError(absl::StrCat("Invalid schema for function '", tool, "': ", detail));
  };
  if (schema.is_boolean()) return absl::OkStatus();
  if (!schema.is_object()) {
    return fail(absl::StrCat(ToJson(schema, JsonStyle::kCompact),
                             " is not of types \"boolean\", \"object\""));
  }
  if (schema.contains("type")) {
    const Json& type = schema["type"];
    bool ok = IsSchemaTypeName(type);
    if (type.is_array()) {
      ok = std::all_of(type.begin(), type.end(), [](const Json& t) { return IsSchemaTypeName(t); });
    }
    if (!ok) {
      return fail(absl::StrCat(ToJson(type, JsonStyle::kCompact),
                               " is not valid under any of the schemas listed in the 'anyOf' "
                               "keyword"));
    }
  }
  for (const char* key : {"properties", "$defs", "definitions", "patternProperties"}) {
    if (!schema.contains(key) || !schema[key].is_object()) continue;
    for (const auto& [name, sub] : schema[key].items()) {
      absl::Status s = CheckSchemaShape(sub, tool);
      if (!s.ok()) return s;
    }
  }
  for (const char* key : {"items", "additionalProperties", "not"}) {
    if (!schema.contains(key) || schema[key].is_array()) continue;
    if (schema[key].is_object() || !schema[key].is_boolean()) {
      absl::Status s = CheckSchemaShape(schema[key], tool);
      if (!s.ok()) return s;
    }
  }
  for (const char* key : {"anyOf", "oneOf", "allOf", "prefixItems"}) {
    if (!schema.contains(key) || !schema[key].is_array()) continue;
    for (const Json& sub : schema[key]) {
      absl::Status s = CheckSchemaShape(sub, tool);
      if (!s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

// Strict mode as OpenAI defines it: an object schema may not admit other properties, and its
// `required` (if given) must name every property.
// A strict schema as the reference reads it: a typed subset of JSON Schema, written back with
// its fields in a fixed order per kind and anything else dropped.
absl::StatusOr<Json> CanonicalStrictSchema(const Json& schema) {
  if (!schema.is_object()) return schema;
  Json out = Json::object();
  auto copy = [&](const char* key) {
    if (auto it = schema.find(key); it != schema.end()) out[key] = *it;
  };
  auto canonical_child = [&](const char* key) -> absl::Status {
    auto it = schema.find(key);
    if (it == schema.end()) return absl::OkStatus();
    absl::StatusOr<Json> child = CanonicalStrictSchema(*it);
    if (!child.ok()) return child.status();
    out[key] = std::move(*child);
    return absl::OkStatus();
  };
  if (auto ref = schema.find("$ref"); ref != schema.end()) {
    out["$ref"] = *ref;
    return out;
  }
  if (auto any = schema.find("anyOf"); any != schema.end()) {
    Json variants = Json::array();
    if (any->is_array()) {
      for (const Json& v : *any) {
        absl::StatusOr<Json> child = CanonicalStrictSchema(v);
        if (!child.ok()) return child.status();
        variants.push_back(std::move(*child));
      }
    }
    out["anyOf"] = std::move(variants);
    copy("description");
    return out;
  }
  auto type = schema.find("type");
  if (type == schema.end()) {
    return RequestError(
        "Invalid tool parameters schema : one of `type`, `anyOf`, `$ref` field is required");
  }
  out["type"] = *type;
  const std::string kind = type->is_string() ? type->get<std::string>() : "";
  if (kind == "object") {
    if (auto props = schema.find("properties"); props != schema.end() && props->is_object()) {
      Json canonical = Json::object();
      for (const auto& [name, sub] : props->items()) {
        absl::StatusOr<Json> child = CanonicalStrictSchema(sub);
        if (!child.ok()) return child.status();
        canonical[name] = std::move(*child);
      }
      out["properties"] = std::move(canonical);
    } else {
      copy("properties");
    }
    copy("additionalProperties");
    copy("required");
    copy("description");
  } else if (kind == "array") {
    absl::Status s = canonical_child("items");
    if (!s.ok()) return s;
    copy("description");
  } else if (kind == "string") {
    copy("description");
    copy("pattern");
    if (auto format = schema.find("format"); format != schema.end()) {
      static constexpr absl::string_view kFormats[] = {"email", "hostname", "ipv4", "ipv6", "uuid"};
      const std::string name = format->is_string() ? format->get<std::string>() : "";
      if (std::find(std::begin(kFormats), std::end(kFormats), name) == std::end(kFormats)) {
        return RequestError(
            absl::StrCat("Invalid tool parameters schema : unknown variant `", name,
                         "`, expected one of `email`, `hostname`, `ipv4`, `ipv6`, `uuid`"));
      }
      out["format"] = *format;
    }
    copy("enum");
  } else if (kind == "number" || kind == "integer") {
    for (const char* key : {"description", "minimum", "maximum", "exclusiveMinimum",
                            "exclusiveMaximum", "multipleOf"}) {
      copy(key);
    }
  } else {
    copy("description");
  }
  return out;
}

// Strict mode as OpenAI defines it, checked in one walk: on entering an object schema, nested
// ones must declare properties and none may admit additional ones; after its subschemas, its
// `required` (if given) must name every property.
absl::Status CheckStrictSchema(Json* schema, bool root) {
  if (!schema->is_object()) return absl::OkStatus();
  auto type = schema->find("type");
  const bool is_object = type != schema->end() && *type == "object";
  if (is_object) {
    auto props = schema->find("properties");
    if (!root && (props == schema->end() || (props->is_object() && props->empty()))) {
      return RequestError("An object with no properties is not allowed.");
    }
    auto extra = schema->find("additionalProperties");
    if (extra != schema->end() && *extra == true) {
      return RequestError("additionalProperties should not be true");
    }
    if (!schema->contains("properties")) (*schema)["properties"] = Json::object();
  }
  for (const char* key : {"properties", "$defs", "definitions"}) {
    auto it = schema->find(key);
    if (it == schema->end() || !it->is_object()) continue;
    for (auto& [unused, sub] : it->items()) {
      absl::Status s = CheckStrictSchema(&sub, false);
      if (!s.ok()) return s;
    }
  }
  if (auto it = schema->find("items"); it != schema->end()) {
    absl::Status s = CheckStrictSchema(&*it, false);
    if (!s.ok()) return s;
  }
  for (const char* key : {"anyOf", "allOf", "oneOf"}) {
    auto it = schema->find(key);
    if (it == schema->end() || !it->is_array()) continue;
    for (Json& sub : *it) {
      absl::Status s = CheckStrictSchema(&sub, false);
      if (!s.ok()) return s;
    }
  }
  auto required = schema->find("required");
  if (is_object && required != schema->end()) {
    std::set<std::string> given, all;
    if (required->is_array()) {
      for (const Json& name : *required) {
        if (name.is_string()) given.insert(name.get<std::string>());
      }
    }
    if ((*schema)["properties"].is_object()) {
      for (const auto& [key, unused] : (*schema)["properties"].items()) all.insert(key);
    }
    if (given != all) {
      return RequestError("Required properties must match all properties in the object");
    }
  }
  return absl::OkStatus();
}

// Closes every object schema: additionalProperties false and all properties required, written
// last (the reference re-inserts both keys).
void CloseObjectSchemas(Json* schema) {
  if (!schema->is_object()) return;
  if (schema->contains("properties") && (*schema)["properties"].is_object()) {
    Json required = Json::array();
    for (auto& [name, sub] : (*schema)["properties"].items()) {
      required.push_back(name);
      CloseObjectSchemas(&sub);
    }
    // additionalProperties and required follow properties; a description stays last.
    std::optional<Json> description;
    if (auto it = schema->find("description"); it != schema->end()) description = *it;
    schema->erase("additionalProperties");
    schema->erase("required");
    schema->erase("description");
    (*schema)["additionalProperties"] = false;
    (*schema)["required"] = std::move(required);
    if (description.has_value()) (*schema)["description"] = std::move(*description);
  }
  if (auto it = schema->find("items"); it != schema->end()) CloseObjectSchemas(&*it);
  for (const char* key : {"anyOf", "allOf", "oneOf"}) {
    auto it = schema->find(key);
    if (it == schema->end() || !it->is_array()) continue;
    for (Json& sub : *it) CloseObjectSchemas(&sub);
  }
  for (const char* key : {"$defs", "definitions"}) {
    auto it = schema->find(key);
    if (it == schema->end() || !it->is_object()) continue;
    for (auto& [unused, sub] : it->items()) CloseObjectSchemas(&sub);
  }
}

}  // namespace

absl::Status BodyError(absl::string_view detail) {
  return RequestError(absl::StrCat("invalid request body: ", detail));
}

std::string DescribeUnexpected(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return absl::StrCat("boolean `", value.get<bool>() ? "true" : "false", "`");
    case Json::value_t::number_integer:
      return absl::StrCat("integer `", value.get<std::int64_t>(), "`");
    case Json::value_t::number_unsigned:
      return absl::StrCat("integer `", value.get<std::uint64_t>(), "`");
    case Json::value_t::number_float:
      return absl::StrCat("floating point `", FormatJsonFloat(value.get<double>()), "`");
    case Json::value_t::string:
      return absl::StrCat("string ", ToJson(value, JsonStyle::kCompact));
    case Json::value_t::array:
      return "sequence";
    default:
      return "map";
  }
}

absl::Status InvalidType(const Json& value, absl::string_view expected) {
  return BodyError(
      absl::StrCat("invalid type: ", DescribeUnexpected(value), ", expected ", expected));
}

absl::Status MissingField(absl::string_view field) {
  return BodyError(absl::StrCat("missing field `", field, "`"));
}

absl::Status UnknownVariant(absl::string_view got,
                            std::initializer_list<absl::string_view> expected) {
  std::vector<std::string> quoted;
  for (absl::string_view e : expected) quoted.push_back(absl::StrCat("`", e, "`"));
  if (quoted.size() == 1) {
    return BodyError(absl::StrCat("unknown variant `", got, "`, expected ", quoted[0]));
  }
  return BodyError(
      absl::StrCat("unknown variant `", got, "`, expected one of ", absl::StrJoin(quoted, ", ")));
}

absl::StatusOr<std::optional<std::string>> ReadString(const Json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return InvalidType(*it, "a string");
  return std::optional<std::string>(it->get<std::string>());
}

absl::StatusOr<std::string> RequireString(const Json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end()) return MissingField(key);
  if (!it->is_string()) return InvalidType(*it, "a string");
  return it->get<std::string>();
}

absl::StatusOr<std::optional<bool>> ReadBool(const Json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::optional<bool>();
  if (!it->is_boolean()) return InvalidType(*it, "a boolean");
  return std::optional<bool>(it->get<bool>());
}

absl::StatusOr<std::optional<double>> ReadF32(const Json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::optional<double>();
  if (!it->is_number()) return InvalidType(*it, "f32");
  return std::optional<double>(AsF32(it->get<double>()));
}

absl::StatusOr<std::optional<std::uint64_t>> ReadUnsigned(const Json& object, const char* key,
                                                          absl::string_view type_name,
                                                          std::uint64_t max) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::optional<std::uint64_t>();
  if (it->is_number_integer() && !it->is_number_unsigned() && it->get<std::int64_t>() < 0) {
    return BodyError(absl::StrCat("invalid value: integer `", it->get<std::int64_t>(),
                                  "`, expected ", type_name));
  }
  if (!it->is_number_unsigned() && !it->is_number_integer()) return InvalidType(*it, type_name);
  const std::uint64_t v = it->get<std::uint64_t>();
  if (v > max) {
    return BodyError(absl::StrCat("invalid value: integer `", v, "`, expected ", type_name));
  }
  return std::optional<std::uint64_t>(v);
}

absl::StatusOr<ModelVersion> ResolveModelVersion(absl::string_view model,
                                                 const ConversionOptions& options) {
  auto it = options.model_versions_by_name.find(std::string(model));
  if (it != options.model_versions_by_name.end()) return it->second;
  std::vector<std::string> names;
  for (const auto& [name, version] : options.model_versions_by_name) names.push_back(name);
  return RequestError(absl::StrCat("The supported API model names are ", absl::StrJoin(names, ", "),
                                   ", but you passed ", model, "."));
}

absl::StatusOr<std::optional<ReasoningEffort>> ParseEffortName(absl::string_view name) {
  if (name == "none") return std::optional<ReasoningEffort>();
  if (name == "minimal" || name == "low") return std::optional(ReasoningEffort::kLow);
  if (name == "medium" || name == "high") return std::optional(ReasoningEffort::kHigh);
  if (name == "xhigh") return std::optional(ReasoningEffort::kXHigh);
  if (name == "ultra" || name == "max") return std::optional(ReasoningEffort::kMax);
  return UnknownVariant(name,
                        {"none", "minimal", "low", "medium", "high", "xhigh", "ultra", "max"});
}

absl::Status CheckToolName(const std::string& name, absl::string_view path) {
  if (name.empty()) {
    return RequestError(absl::StrCat("Invalid '", path,
                                     "': empty string. Expected a string with minimum length 1, "
                                     "but got an empty string instead."));
  }
  if (!std::all_of(name.begin(), name.end(), IsToolNameChar)) {
    return RequestError(absl::StrCat("Invalid '", path,
                                     "': string does not match pattern. Expected a string that "
                                     "matches the pattern '^[a-zA-Z0-9_-]+$'."));
  }
  return absl::OkStatus();
}

absl::StatusOr<ToolDefinition> ConvertFunctionTool(const std::string& name,
                                                   std::optional<std::string> description,
                                                   std::optional<Json> parameters,
                                                   std::optional<bool> strict,
                                                   absl::string_view path) {
  absl::Status name_ok = CheckToolName(name, path);
  if (!name_ok.ok()) return name_ok;
  ToolDefinition tool;
  tool.name = name;
  tool.description = std::move(description);
  tool.strict = strict;
  const bool is_strict = strict.value_or(false);
  if (parameters.has_value()) {
    tool.parameters = std::move(*parameters);
  } else {
    // A strict tool without parameters takes no arguments: an empty closed object.
    tool.parameters = Json::object();
    if (is_strict) tool.parameters["type"] = "object";
  }
  if (parameters.has_value()) {
    absl::Status shape = CheckSchemaShape(tool.parameters, name);
    if (!shape.ok()) return shape;
    const Json type = tool.parameters.is_object() && tool.parameters.contains("type")
                          ? tool.parameters["type"]
                          : Json(nullptr);
    if (!(type.is_string() && type.get<std::string>() == "object")) {
      return RequestError(
          absl::StrCat("Invalid schema for function '", name,
                       "': schema must be a JSON Schema of 'type: \"object\"', got 'type: ",
                       ToJson(type, JsonStyle::kCompact), "'."));
    }
  }
  if (is_strict) {
    absl::StatusOr<Json> canonical = CanonicalStrictSchema(tool.parameters);
    if (!canonical.ok()) return canonical.status();
    tool.parameters = std::move(*canonical);
    absl::Status s = CheckStrictSchema(&tool.parameters, /*root=*/true);
    if (!s.ok()) return s;
    CloseObjectSchemas(&tool.parameters);
  }
  return tool;
}

absl::Status CheckUniqueToolNames(const std::vector<ToolDefinition>& tools) {
  for (std::size_t i = 0; i < tools.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (tools[i].name == tools[j].name) return RequestError("Tool names must be unique.");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckStrictNotMixed(const std::vector<ToolDefinition>& tools) {
  bool any_strict = false, any_loose = false;
  for (const ToolDefinition& tool : tools)
    (tool.strict.value_or(false) ? any_strict : any_loose) = true;
  if (any_strict && any_loose) {
    return RequestError("Cannot use strict tool with non-strict tool in the same request");
  }
  return absl::OkStatus();
}

void ResolveSampling(ModelVersion version, const Conversation& conversation,
                     std::optional<double> temperature, std::optional<double> top_p,
                     InferenceOptions* inference) {
  const bool thinking = conversation.thinking_mode;
  const bool tools_active =
      !conversation.tools.empty() && conversation.tool_choice != ToolChoice::kNone;
  const double kThinkingTopPFloor = AsF32(0.95);
  inference->temperature = thinking ? 1.0 : temperature.value_or(1.0);
  if (version == ModelVersion::kDeepseekV41) {
    inference->top_p = thinking ? std::max(top_p.value_or(1.0), kThinkingTopPFloor) : 1.0;
  } else {
    inference->top_p = thinking ? (tools_active ? kThinkingTopPFloor : 1.0) : top_p.value_or(1.0);
  }
}

std::optional<OutputConstraint> OutputConstraintFor(const Conversation& conversation) {
  const bool tools_active =
      !conversation.tools.empty() && conversation.tool_choice != ToolChoice::kNone;
  if (tools_active) {
    Json list = Json::array();
    for (const ToolDefinition& tool : conversation.tools) {
      Json function = Json::object();
      function["name"] = tool.name;
      function["description"] =
          tool.description.has_value() ? Json(*tool.description) : Json(nullptr);
      function["parameters"] = tool.parameters;
      function["strict"] = tool.strict.has_value() ? Json(*tool.strict) : Json(nullptr);
      Json entry = Json::object();
      entry["type"] = "function";
      entry["function"] = std::move(function);
      if (tool.defer_loading) entry["defer_loading"] = true;
      list.push_back(std::move(entry));
    }
    return OutputConstraint{
        conversation.tool_choice == ToolChoice::kRequired ? "tool_call_required" : "tool_call",
        ToJson(list, JsonStyle::kCompact)};
  }
  switch (conversation.response_format) {
    case ResponseFormat::kJsonObject:
      return OutputConstraint{"json", ""};
    case ResponseFormat::kJsonSchema:
      return OutputConstraint{
          "json", ToJson(conversation.response_schema.value_or(nullptr), JsonStyle::kCompact)};
    case ResponseFormat::kRegex:
      return OutputConstraint{"regex", conversation.response_regex.value_or("")};
    case ResponseFormat::kText:
      break;
  }
  return std::nullopt;
}

ParsingOptions ParsingOptionsFor(const Conversation& conversation,
                                 std::vector<std::string> stop_sequences) {
  ParsingOptions p;
  const bool tools_active =
      !conversation.tools.empty() && conversation.tool_choice != ToolChoice::kNone;
  p.parse_tool_calls = tools_active;
  p.starts_in_tool_calls = tools_active && conversation.tool_choice == ToolChoice::kRequired;
  p.parse_json_output = conversation.response_format == ResponseFormat::kJsonObject;
  if (conversation.thinking_mode) {
    p.thinking_initial_stage = ThinkingInitialStage::kReasoningStart;
    if (!conversation.messages.empty()) {
      const Message& last = conversation.messages.back();
      // A prefix with answer text continues the answer; one with only reasoning continues the
      // reasoning; an empty one starts the turn afresh.
      if (last.role == Role::kAssistant && last.prefix) {
        if (!last.content.empty()) {
          p.thinking_initial_stage = ThinkingInitialStage::kContentContinuation;
        } else if (!last.reasoning_content.value_or("").empty()) {
          p.thinking_initial_stage = ThinkingInitialStage::kReasoningContinuation;
        }
      }
    }
  }
  p.stop_sequences = std::move(stop_sequences);
  return p;
}

bool MentionsJson(const Conversation& conversation) {
  for (const Message& m : conversation.messages) {
    if (absl::StrContains(absl::AsciiStrToLower(m.content), "json")) return true;
  }
  return false;
}

}  // namespace tandem::recipe::internal
