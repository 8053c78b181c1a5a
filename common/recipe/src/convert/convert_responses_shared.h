#pragma once

// What the Responses and Messages converters share beyond convert_common.h: tagged-enum reads,
// sampling range checks, strict-schema rules, the tool choice, reasoning-content handling and
// the Python-style JSON of Messages tool inputs. Everything here is a pure function of the request
// and the options.

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "convert/convert_common.h"
#include "tandem/recipe/conversation.h"
#include "tandem/recipe/convert.h"
#include "tandem/recipe/errors.h"

namespace tandem::recipe::internal {

// A string field restricted to `allowed` (serde unit variants); absent or null: nullopt.
absl::StatusOr<std::optional<std::string>> ReadVariant(
    const Json& object, const char* key, std::initializer_list<absl::string_view> allowed);
// The "type" tag of an internally tagged object.
absl::StatusOr<std::string> RequireTag(const Json& object,
                                       std::initializer_list<absl::string_view> allowed);
inline constexpr std::initializer_list<absl::string_view> kEffortVariants = {
    "none", "minimal", "low", "medium", "high", "xhigh", "ultra", "max"};

// temperature in [0, 2], top_p in (0, 1].
absl::Status CheckSamplingRanges(std::optional<double> temperature, std::optional<double> top_p);

// The value the oracle reports for an f32 request field: its shortest decimal, as a double.
double FloatAsShortestDouble(double value);

// An object field; absent or null: nullptr.
absl::StatusOr<const Json*> ReadObject(const Json& object, const char* key,
                                       absl::string_view expected);
// A u32 field.
absl::StatusOr<std::optional<std::uint32_t>> ReadU32(const Json& object, const char* key);

// A client function tool as declared; its name was checked at declaration.
struct ToolSpec {
  std::string name;        // as the model sees it
  std::string local_name;  // as declared (a namespace member's own name)
  std::optional<std::string> description;
  std::optional<Json> parameters;  // absent: an empty schema
  std::optional<bool> strict;
  std::optional<ToolDefinition> fixed;  // a built-in tool (apply_patch), used as is
};
// The tools in play (the tool choice is not "none"): names unique, schemas valid (strict ones
// closed), strict and non-strict not mixed. Schema errors name the tool as the model sees it.
absl::StatusOr<std::vector<ToolDefinition>> BuildTools(std::vector<ToolSpec> specs);
// Strict normalisation of a response JSON schema (every object closed, all properties required).
absl::Status NormalizeStrictSchema(Json& schema);
// The meta-schema violation of a JSON Schema, in the validator's words, or nullopt.
std::optional<std::string> MetaSchemaError(const Json& schema);

// The tool choice: "none" drops the tools, a named function keeps only that tool and requires a
// call, and thinking mode refuses a required call. Without tools only "none" is kept.
struct ToolChoiceSpec {
  ToolChoice mode = ToolChoice::kAuto;
  std::optional<std::string> function;  // forced function name
};
absl::Status ApplyToolChoice(const ToolChoiceSpec& choice, Conversation& conversation);

// Outside thinking mode past reasoning is dropped; inside it, missing reasoning is filled with ""
// or, for the assistant messages of a turn that called tools, refused with `reject_message`.
absl::Status ApplyReasoningContentBehavior(const ConversionOptions& options,
                                           absl::string_view reject_message,
                                           Conversation& conversation);

// Stop sequences must be non-empty strings.
absl::Status CheckStopSequences(const std::vector<std::string>& stops);

// A JSON value with Python's json.dumps separators (", " and ": "), non-ASCII kept, exponents
// signed ("1e+20"): how deepseek-recipe writes a Messages tool_use input as call arguments.
std::string PythonStyleJson(const Json& value);

// Whether the model version reads images (V4.1); V4 gets a text placeholder instead.
inline bool ReadsImages(ModelVersion version) { return version == ModelVersion::kDeepseekV41; }
inline constexpr absl::string_view kUnsupportedImage = "[Unsupported Image]";
// An image URL the model can be given: http(s) (any case) or a base64 data URL.
std::optional<ImageSource::Kind> ImageUrlKind(absl::string_view url);

// Output constraint and parsing options of the finished request.
void FinishRequest(ConversationRequest& request, std::vector<std::string> stop_sequences);

}  // namespace tandem::recipe::internal
