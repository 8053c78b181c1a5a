#pragma once

// The fixed prompt text of the DeepSeek V4 / V4.1 chat format. These strings are part of the model
// format (what the model was trained on), reproduced byte for byte.

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tandem::recipe::internal {

// Thinking-mode effort instructions written before the system text (V4: high/xhigh and unset
// effort share one text; low writes none).
inline constexpr absl::string_view kV4EffortHigh =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to "
    "resolve the root cause, rigorously stress-testing your logic against all potential paths, "
    "edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, "
    "considered alternative, and rejected hypothesis to ensure absolutely no assumption is left "
    "unchecked.\n\n";
inline constexpr absl::string_view kV4EffortMax =
    "Reasoning Effort: Beyond maximum — exhaustive, relentless, and uncompromising.\n"
    "You MUST reason with the utmost depth and rigor, leaving absolutely nothing to chance: "
    "exhaustively decompose the problem into its most fundamental components, trace every causal "
    "chain to its root, and resolve the underlying cause rather than any surface symptom.\n"
    "Do not stop reasoning until you have independently verified the solution from multiple angles "
    "and are certain that no assumption remains unchecked and no error remains undiscovered.\n\n";
// V4.1: "Reasoning Effort: <level> (range 1-100, ...)\n\n".
inline constexpr absl::string_view kV41EffortPrefix = "Reasoning Effort: ";
inline constexpr absl::string_view kV41EffortSuffix =
    " (range 1-100, the higher the value, the more thorough the reasoning)\n\n";

// The names inside DSML tool-call markup.
struct DsmlNames {
  absl::string_view calls;      // V4 "tool_calls", V4.1 " calls"
  absl::string_view invoke;     // V4 "invoke", V4.1 " invoke"
  absl::string_view parameter;  // V4 "parameter", V4.1 " parameter"
};

// "\n\n## Tools ..." up to the tool schema lines.
inline std::string ToolsPreamble(const DsmlNames& n) {
  const std::string open = absl::StrCat("<｜DSML｜", n.calls, ">");
  const std::string close = absl::StrCat("</｜DSML｜", n.calls, ">");
  const std::string invoke = absl::StrCat("<｜DSML｜", n.invoke, " name=\"");
  const std::string invoke_end = absl::StrCat("</｜DSML｜", n.invoke, ">");
  return absl::StrCat(
      "\n\n## Tools\n\n"
      "You have access to a set of tools to help answer the user's question. You can invoke tools "
      "by writing a \"",
      open, "\" block like the following:\n\n", open, "\n", invoke, "$TOOL_NAME\">\n<｜DSML｜",
      n.parameter, " name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜",
      n.parameter, ">\n...\n", invoke_end, "\n", invoke, "$TOOL_NAME2\">\n...\n", invoke_end, "\n",
      close,
      "\n\n"
      "String parameters should be specified as is and set `string=\"true\"`. For all other types "
      "(numbers, booleans, arrays, objects), pass the value in JSON format and set "
      "`string=\"false\"`.\n\n"
      "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning "
      "inside <think>...</think> BEFORE any tool calls or final response.\n\n"
      "Otherwise, output directly after </think> with tool calls or final response.\n\n"
      "### Available Tool Schemas\n\n");
}
inline constexpr absl::string_view kToolsPostamble =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool "
    "calls.\n";
// V4.1: tools declared on a system message.
inline constexpr absl::string_view kUpdatedToolSchemas = "\n\n### Updated Tool Schemas\n\n";

inline constexpr absl::string_view kV4JsonObjectFormat =
    "\n\nYou are a helpful assistant designed to output JSON.\n## Response Format:\n\n"
    "Reply with JSON object ONLY.";
inline constexpr absl::string_view kSchemaFormat =
    "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";
inline constexpr absl::string_view kV41JsonObjectSchema = "{\"type\": \"json_object\"}";

inline constexpr absl::string_view kToolResultOpen = "<tool_result>";
inline constexpr absl::string_view kToolResultClose = "</tool_result>";

}  // namespace tandem::recipe::internal
