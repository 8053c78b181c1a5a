#pragma once

// The protocol-neutral conversation every API request is converted into, and what the renderer,
// the output parser and the response builders share. It mirrors deepseek-recipe's model (the
// authority for DeepSeek V4 / V4.1 serving), so that a differential test can compare field by field.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace tandem::recipe {

enum class ModelVersion { kDeepseekV4, kDeepseekV41 };

enum class Role { kSystem, kUser, kAssistant, kTool, kLatestReminder };

enum class ImageDetail { kLow, kHigh, kOriginal, kAuto };

// Images are carried, not fetched: the router has no vision path yet, so a request with images is
// rendered with placeholders and refused at dispatch with a clear error.
struct ImageSource {
  enum class Kind { kDataUrl, kUrl, kBytes };
  Kind kind = Kind::kUrl;
  std::string data;  // the data URL, the URL, or the encoded bytes
  ImageDetail detail = ImageDetail::kHigh;
  std::string path;  // request location for errors, e.g. "messages.0.content[1]"
};

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON object text as the caller sent it (not re-serialised)
};

struct ToolDefinition {
  std::string name;
  std::optional<std::string> description;
  nlohmann::ordered_json parameters;  // JSON Schema, key order preserved for byte-exact rendering
  std::optional<bool> strict;
  bool defer_loading = false;
};

struct Message {
  Role role = Role::kUser;
  std::string content;
  // Assistant only.
  std::optional<std::string> reasoning_content;
  std::optional<std::vector<ToolCall>> tool_calls;
  bool prefix = false;  // continue this assistant message instead of starting a new turn
  // Tool only.
  std::optional<std::string> tool_call_id;
  // System only: tools declared on this system message.
  std::optional<std::vector<ToolDefinition>> tools;
  // User, tool and system: images whose placeholders are the first occurrences of the image token.
  std::vector<ImageSource> image_sources;
  // Where the converter put each image's placeholder (byte offsets into `content`), so that an
  // image-token spelling the client typed before it stays plain text. Empty: the first
  // occurrences, as above.
  std::vector<std::size_t> image_offsets;
};

enum class ToolChoice { kAuto, kNone, kRequired };
enum class ReasoningEffort { kLow, kHigh, kXHigh, kMax };
enum class ResponseFormat { kText, kJsonObject, kJsonSchema, kRegex };

struct Conversation {
  std::vector<Message> messages;
  bool thinking_mode = true;
  std::vector<ToolDefinition> tools;
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::optional<ReasoningEffort> reasoning_effort;
  ResponseFormat response_format = ResponseFormat::kText;
  std::optional<nlohmann::ordered_json> response_schema;  // kJsonSchema
  std::optional<std::string> response_regex;             // kRegex
};

// A constraint constrained decoding could enforce; carried for the backend, which may ignore it.
struct OutputConstraint {
  std::string kind;    // "json", "regex", "tool_call", "tool_call_required"
  std::string schema;  // compact JSON / regex / tool list; empty for any JSON value
};

struct InferenceOptions {
  std::optional<std::int64_t> max_tokens;
  std::optional<double> temperature;
  std::optional<double> top_p;
  bool logprobs = false;
  std::optional<int> top_logprobs;
  std::optional<std::uint64_t> seed;
  std::optional<OutputConstraint> output_constraint;
};

enum class ThinkingInitialStage { kReasoningStart, kReasoningContinuation, kContentContinuation };

struct ParsingOptions {
  bool parse_tool_calls = true;
  bool starts_in_tool_calls = false;  // tool_choice=required: the prompt opened the tool block
  bool parse_json_output = false;
  std::optional<ThinkingInitialStage> thinking_initial_stage;  // nullopt: thinking mode is off
  std::vector<std::string> stop_sequences;
};

enum class Protocol { kChatCompletions, kResponses, kMessages };

// A converted request: what to render, how to sample, how to parse the output.
struct ConversationRequest {
  Protocol protocol = Protocol::kChatCompletions;
  std::string model;  // as the client named it (echoed in responses)
  ModelVersion model_version = ModelVersion::kDeepseekV4;
  Conversation conversation;
  InferenceOptions inference;
  ParsingOptions parsing;
  bool stream = false;
  bool include_usage = false;  // Chat Completions stream_options.include_usage
  // Protocol-specific settings the response builders echo (Responses: instructions, tools,
  // reasoning, text, tool_choice, max_output_tokens, user...; Messages: nothing yet). Raw JSON so
  // that each builder reads what it needs without widening this struct per protocol.
  nlohmann::ordered_json echo;
};

// Lower-case wire names ("system", "user", ...; "v4", "v4.1").
absl::string_view RoleName(Role role);
absl::string_view ModelVersionName(ModelVersion version);

}  // namespace tandem::recipe
