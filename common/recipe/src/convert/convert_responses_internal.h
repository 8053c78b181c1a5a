#pragma once

// The pieces of the OpenAI Responses conversion: tool declarations and the tool choice
// (convert_responses_tools.cc) and input items (convert_responses_input.cc).

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "convert/convert_responses_shared.h"
#include "tandem/recipe/conversation.h"
#include "tandem/recipe/convert.h"

namespace tandem::recipe::internal {

struct ResponsesTools {
  std::vector<ToolSpec> specs;  // declared; schemas are checked once the tool choice is known
  // Function name given to each namespace tool -> (namespace, local name).
  std::map<std::string, std::pair<std::string, std::string>> namespace_tool_map;
  // (namespace, local name) -> function name, to resolve namespaced calls in the input.
  std::map<std::pair<std::string, std::string>, std::string> namespaced_names;
};

// The `apply_patch` custom tool as the model knows it.
ToolDefinition ApplyPatchTool(ModelVersion version);

// Reads `tools` (null or absent: none) and checks the declarations (names, custom tools).
// V4.1 names namespace tools "<namespace>::<name>". Web-search tools are dropped or refused per
// options; server tools this stack cannot run are dropped.
absl::StatusOr<ResponsesTools> ConvertResponsesTools(const Json& body,
                                                     const ConversionOptions& options,
                                                     ModelVersion version);

// Reads `tool_choice`; a web-search choice reads as auto (or is refused per options).
absl::StatusOr<ToolChoiceSpec> ReadResponsesToolChoice(const Json& body,
                                                       const ConversionOptions& options);

// `input` (string or items) -> messages, with tool calls paired to their outputs.
absl::StatusOr<std::vector<Message>> ConvertResponsesInput(const Json& input,
                                                           const ResponsesTools& tools,
                                                           ModelVersion version);

// Where a content list sits, for image handling and error paths.
struct ContentPlace {
  bool reads_images = false;  // V4.1: images become placeholders with sources
  std::size_t item = 0;       // index in `input`
  bool assistant = false;     // assistant messages cannot carry images
  bool tool_output = false;   // "output" of a tool result (no output_text parts)
};
// The text of a content part list or string, parts joined by a blank line; images of a
// vision-capable model are appended to `images`, their placeholders' offsets to `offsets`.
absl::StatusOr<std::string> ResponsesContentText(const Json& content, const ContentPlace& place,
                                                 std::vector<ImageSource>& images,
                                                 std::vector<std::size_t>& offsets);

}  // namespace tandem::recipe::internal
