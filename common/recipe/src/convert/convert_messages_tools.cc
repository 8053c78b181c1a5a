// Messages tools: client tools (no "type") with an input_schema, and server tools, which this
// stack cannot run: web search is dropped or refused per options, anything else is refused.

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "convert/convert_messages_internal.h"
#include "tandem/base/status_macros.h"

namespace tandem::recipe::internal {
namespace {

bool IsWebSearch(const ToolSpec& spec) { return spec.name == "web_search"; }

}  // namespace

absl::StatusOr<std::vector<MessagesToolDecl>> ReadMessagesTools(const Json& body) {
  std::vector<MessagesToolDecl> decls;
  auto it = body.find("tools");
  if (it == body.end() || it->is_null()) return decls;
  if (!it->is_array()) return InvalidType(*it, "a sequence");
  for (const Json& tool : *it) {
    MessagesToolDecl decl;
    if (tool.is_object() && tool.contains("type") && !tool["type"].is_null()) {
      decl.server = true;
      if (auto name = tool.find("name"); name != tool.end() && name->is_string()) {
        decl.spec.name = name->get<std::string>();
      }
      decls.push_back(std::move(decl));
      continue;
    }
    if (!tool.is_object()) return MissingField("name");
    TANDEM_ASSIGN_OR_RETURN(decl.spec.name, RequireString(tool, "name"));
    auto description = ReadString(tool, "description");
    if (!description.ok()) {
      return BodyError(absl::StrCat(
          "field `description`: ",
          absl::StripPrefix(description.status().message(), "invalid request body: ")));
    }
    decl.spec.description = *std::move(description);
    // A missing schema is validated as null, which the schema check refuses.
    decl.spec.parameters = tool.value("input_schema", Json());
    decls.push_back(std::move(decl));
  }
  return decls;
}

absl::StatusOr<std::vector<ToolSpec>> CheckMessagesTools(const std::vector<MessagesToolDecl>& decls,
                                                         const ConversionOptions& options) {
  std::vector<ToolSpec> specs;
  for (std::size_t i = 0; i < decls.size(); ++i) {
    const MessagesToolDecl& decl = decls[i];
    const std::string path = absl::StrCat("tools[", i, "]");
    if (decl.server) {
      if (IsWebSearch(decl.spec) && options.messages_web_search == WebSearchBehavior::kDrop) {
        continue;
      }
      return RequestError(absl::StrCat(path, ": server tools are not supported"));
    }
    TANDEM_RETURN_IF_ERROR(CheckToolName(decl.spec.name, absl::StrCat(path, ".name")));
    ToolSpec spec = decl.spec;
    spec.local_name = spec.name;
    specs.push_back(std::move(spec));
  }
  return specs;
}

absl::StatusOr<ToolChoiceSpec> ReadMessagesToolChoice(const Json& body,
                                                      const std::vector<MessagesToolDecl>& decls) {
  ToolChoiceSpec choice;
  auto it = body.find("tool_choice");
  if (it == body.end() || it->is_null()) return choice;
  if (!it->is_object()) return InvalidType(*it, "internally tagged enum MessagesToolChoice");
  TANDEM_ASSIGN_OR_RETURN(std::string type, RequireTag(*it, {"auto", "any", "tool", "none"}));
  TANDEM_RETURN_IF_ERROR(ReadBool(*it, "disable_parallel_tool_use").status());
  // "any" reads as auto: the model may still answer in text.
  if (type == "none") choice.mode = ToolChoice::kNone;
  if (type == "tool") {
    TANDEM_ASSIGN_OR_RETURN(std::string name, RequireString(*it, "name"));
    bool names_server_tool =
        std::any_of(decls.begin(), decls.end(),
                    [&](const MessagesToolDecl& d) { return d.server && d.spec.name == name; });
    if (!names_server_tool) choice.function = std::move(name);
  }
  return choice;
}

}  // namespace tandem::recipe::internal
