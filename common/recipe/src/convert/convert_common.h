#pragma once

// Helpers every protocol converter shares: serde-style body errors (deepseek-recipe parses bodies
// with serde, and its messages are part of what clients see), typed field readers, model-name
// resolution, reasoning effort, function tools (name rules, schema checks, strict normalisation),
// sampling defaults and the output constraint / parsing options derived from a conversation.

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "tandem/recipe/conversation.h"
#include "tandem/recipe/convert.h"

namespace tandem::recipe::internal {

using Json = nlohmann::ordered_json;

// --- Body (shape) errors: 400 "invalid request body: <serde message>". ---
absl::Status BodyError(absl::string_view detail);
// serde's description of an unexpected value: "map", "sequence", "string \"x\"", "integer `5`".
std::string DescribeUnexpected(const Json& value);
absl::Status InvalidType(const Json& value, absl::string_view expected);
absl::Status MissingField(absl::string_view field);
absl::Status UnknownVariant(absl::string_view got,
                            std::initializer_list<absl::string_view> expected);

// Typed readers of an object field; absent or null reads as nullopt (serde's Option).
absl::StatusOr<std::optional<std::string>> ReadString(const Json& object, const char* key);
absl::StatusOr<std::string> RequireString(const Json& object, const char* key);
absl::StatusOr<std::optional<bool>> ReadBool(const Json& object, const char* key);
// Rust f32 fields: the value is rounded to float, as the reference's arithmetic sees it.
absl::StatusOr<std::optional<double>> ReadF32(const Json& object, const char* key);
// Unsigned integer fields ("u32", "u64"); `max` is the type's maximum.
absl::StatusOr<std::optional<std::uint64_t>> ReadUnsigned(const Json& object, const char* key,
                                                          absl::string_view type_name,
                                                          std::uint64_t max);

// --- Semantics. ---
absl::StatusOr<ModelVersion> ResolveModelVersion(absl::string_view model,
                                                 const ConversionOptions& options);

// A reasoning-effort name as the protocols spell it: nullopt for "none" (thinking off);
// minimal/low -> low, medium/high -> high, xhigh, ultra/max -> max; anything else a body error.
absl::StatusOr<std::optional<ReasoningEffort>> ParseEffortName(absl::string_view name);

// ^[a-zA-Z0-9_-]+$, non-empty; `path` names the field in errors.
absl::Status CheckToolName(const std::string& name, absl::string_view path);

// A function tool as converted: name checked against ^[a-zA-Z0-9_-]+$ (`path` names the field in
// errors, e.g. "tools[0].function.name"), parameters defaulted to {} and checked to be an object
// schema; strict schemas checked (no additionalProperties: true, `required` naming every
// property) and closed (additionalProperties false, every property required).
absl::StatusOr<ToolDefinition> ConvertFunctionTool(const std::string& name,
                                                   std::optional<std::string> description,
                                                   std::optional<Json> parameters,
                                                   std::optional<bool> strict,
                                                   absl::string_view path);
absl::Status CheckUniqueToolNames(const std::vector<ToolDefinition>& tools);
// Responses and Messages refuse to mix strict and non-strict tools (Chat Completions does not).
absl::Status CheckStrictNotMixed(const std::vector<ToolDefinition>& tools);

// temperature / top_p as sent to the engine, by model version, thinking mode and tools.
void ResolveSampling(ModelVersion version, const Conversation& conversation,
                     std::optional<double> temperature, std::optional<double> top_p,
                     InferenceOptions* inference);

// The constraint constrained decoding could enforce for the conversation's format and tools.
std::optional<OutputConstraint> OutputConstraintFor(const Conversation& conversation);

// Parser settings: tool parsing when tools are in play, the required-tool opener, JSON mode,
// where thinking starts (a prefix continuation starts inside its reasoning or its answer).
ParsingOptions ParsingOptionsFor(const Conversation& conversation,
                                 std::vector<std::string> stop_sequences);

// Whether any message text mentions "json" (any case), which json_object mode requires.
bool MentionsJson(const Conversation& conversation);

}  // namespace tandem::recipe::internal
