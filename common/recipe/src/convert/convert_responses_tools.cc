// Responses tool declarations: function tools, namespaces of function tools (flattened to
// "<namespace>__<name>"), the apply_patch custom tool, and web search, which this stack cannot
// run.

#include <set>

#include "absl/strings/str_cat.h"
#include "convert/convert_responses_internal.h"
#include "tandem/base/status_macros.h"

namespace tandem::recipe::internal {
namespace {

const std::vector<absl::string_view>& WebSearchTypes() {
  static const std::vector<absl::string_view> kTypes = {"web_search", "web_search_2025_08_26"};
  return kTypes;
}

bool IsWebSearch(const std::string& type) {
  for (absl::string_view name : WebSearchTypes()) {
    if (type == name) return true;
  }
  return false;
}

absl::StatusOr<ToolSpec> ReadFunctionTool(const Json& tool) {
  ToolSpec spec;
  TANDEM_ASSIGN_OR_RETURN(spec.name, RequireString(tool, "name"));
  TANDEM_ASSIGN_OR_RETURN(spec.description, ReadString(tool, "description"));
  if (auto it = tool.find("parameters"); it != tool.end() && !it->is_null()) spec.parameters = *it;
  TANDEM_ASSIGN_OR_RETURN(spec.strict, ReadBool(tool, "strict"));
  return spec;
}

struct NamespaceMember {
  ToolSpec spec;
  bool custom = false;  // refused: a namespace holds function tools only
};

struct NamespaceDecl {
  std::string name;
  std::string description;
  std::vector<NamespaceMember> members;
};

// The declared tools in order; a namespace entry carries its functions.
struct ToolDecl {
  std::optional<ToolSpec> function;
  std::optional<NamespaceDecl> space;
  bool apply_patch = false;
};

absl::StatusOr<std::vector<ToolDecl>> ReadTools(const Json& list,
                                                const ConversionOptions& options) {
  std::vector<ToolDecl> decls;
  if (!list.is_array()) return InvalidType(list, "a sequence");
  // Shape errors come first (the oracle deserializes the whole body before converting).
  for (const Json& tool : list) {
    if (!tool.is_object()) return InvalidType(tool, "internally tagged enum ResponsesTool");
    auto type = tool.find("type");
    if (type == tool.end()) return MissingField("type");
    if (!type->is_string()) return InvalidType(*type, "a string");
    const std::string kind = type->get<std::string>();
    ToolDecl decl;
    if (kind == "function") {
      TANDEM_ASSIGN_OR_RETURN(decl.function, ReadFunctionTool(tool));
    } else if (kind == "namespace") {
      NamespaceDecl space;
      TANDEM_ASSIGN_OR_RETURN(space.name, RequireString(tool, "name"));
      TANDEM_ASSIGN_OR_RETURN(std::optional<std::string> description,
                              ReadString(tool, "description"));
      space.description = description.value_or("");
      auto inner = tool.find("tools");
      if (inner == tool.end()) return MissingField("tools");
      if (!inner->is_array()) return InvalidType(*inner, "a sequence");
      for (const Json& entry : *inner) {
        if (!entry.is_object())
          return InvalidType(entry, "internally tagged enum ResponsesNamespaceTool");
        TANDEM_ASSIGN_OR_RETURN(std::string inner_kind, RequireTag(entry, {"function", "custom"}));
        NamespaceMember member;
        member.custom = inner_kind == "custom";
        if (member.custom) {
          TANDEM_ASSIGN_OR_RETURN(member.spec.name, RequireString(entry, "name"));
        } else {
          TANDEM_ASSIGN_OR_RETURN(member.spec, ReadFunctionTool(entry));
        }
        space.members.push_back(std::move(member));
      }
      decl.space = std::move(space);
    } else if (kind == "custom") {
      TANDEM_ASSIGN_OR_RETURN(std::string name, RequireString(tool, "name"));
      decl.apply_patch = true;
      decl.function = ToolSpec{};
      decl.function->name = name;
    } else if (IsWebSearch(kind) && options.responses_web_search == WebSearchBehavior::kReject) {
      return RequestError("Server tools are not supported");
    }
    // Web search (dropped) and tools this stack cannot run leave no declaration.
    decls.push_back(std::move(decl));
  }
  return decls;
}

}  // namespace

absl::StatusOr<ResponsesTools> ConvertResponsesTools(const Json& body,
                                                     const ConversionOptions& options,
                                                     ModelVersion version) {
  // V4.1 knows namespaces: "<namespace>::<name>", described under the namespace's description.
  const bool v41 = version == ModelVersion::kDeepseekV41;
  const absl::string_view separator = v41 ? "::" : "__";
  ResponsesTools result;
  auto it = body.find("tools");
  if (it == body.end() || it->is_null()) return result;
  TANDEM_ASSIGN_OR_RETURN(std::vector<ToolDecl> decls, ReadTools(*it, options));

  // Top-level names are reserved first; namespace functions take the next free suffix.
  std::set<std::string> taken;
  for (const ToolDecl& decl : decls) {
    if (decl.function && !decl.apply_patch) taken.insert(decl.function->name);
  }
  for (std::size_t i = 0; i < decls.size(); ++i) {
    ToolDecl& decl = decls[i];
    const std::string path = absl::StrCat("tools[", i, "]");
    if (decl.apply_patch) {
      if (decl.function->name != "apply_patch") {
        return RequestError(absl::StrCat("Unsupported custom tool: '", decl.function->name,
                                         "'. Only 'apply_patch' is supported."));
      }
      ToolSpec spec;
      spec.name = spec.local_name = "apply_patch";
      spec.fixed = ApplyPatchTool(version);
      result.specs.push_back(std::move(spec));
    } else if (decl.function) {
      TANDEM_RETURN_IF_ERROR(CheckToolName(decl.function->name, absl::StrCat(path, ".name")));
      decl.function->local_name = decl.function->name;
      result.specs.push_back(std::move(*decl.function));
    } else if (decl.space) {
      TANDEM_RETURN_IF_ERROR(CheckToolName(decl.space->name, absl::StrCat(path, ".name")));
      std::set<std::string> local_names;
      for (std::size_t j = 0; j < decl.space->members.size(); ++j) {
        ToolSpec& spec = decl.space->members[j].spec;
        if (decl.space->members[j].custom) {
          return RequestError(absl::StrCat(
              "Currently custom tools are not allowed inside a namespace. Found custom tool '",
              spec.name, "' in ", path, ".tools[", j, "]."));
        }
        const std::string member_path = absl::StrCat(path, ".tools[", j, "]");
        TANDEM_RETURN_IF_ERROR(CheckToolName(spec.name, absl::StrCat(member_path, ".name")));
        if (!local_names.insert(spec.name).second) {
          return RequestError("Tool names within a namespace must be unique.");
        }
        const std::string local = spec.name;
        std::string name = absl::StrCat(decl.space->name, separator, local);
        for (int suffix = 1; taken.count(name) > 0; ++suffix) {
          name = absl::StrCat(decl.space->name, separator, local, "_", suffix);
        }
        if (v41 && !decl.space->description.empty()) {
          spec.description =
              absl::StrCat(decl.space->description, "\n", spec.description.value_or(""));
        }
        taken.insert(name);
        spec.name = name;
        spec.local_name = local;
        result.namespace_tool_map[name] = {decl.space->name, local};
        result.namespaced_names[{decl.space->name, local}] = name;
        result.specs.push_back(std::move(spec));
      }
    }
  }
  return result;
}

absl::StatusOr<ToolChoiceSpec> ReadResponsesToolChoice(const Json& body,
                                                       const ConversionOptions& options) {
  ToolChoiceSpec choice;
  auto it = body.find("tool_choice");
  if (it == body.end() || it->is_null()) return choice;
  const Json& value = *it;
  static constexpr char kExpected[] =
      "expected one of `none`, `auto`, `required` or a tool choice object";
  if (value.is_string()) {
    const std::string mode = value.get<std::string>();
    if (mode == "none")
      choice.mode = ToolChoice::kNone;
    else if (mode == "auto")
      choice.mode = ToolChoice::kAuto;
    else if (mode == "required")
      choice.mode = ToolChoice::kRequired;
    else
      return BodyError(kExpected);
    return choice;
  }
  if (!value.is_object()) return BodyError(kExpected);
  TANDEM_ASSIGN_OR_RETURN(std::string type, RequireTag(value, {"function", "web_search",
                                                               "web_search_2025_08_26", "custom"}));
  if (type == "function" || type == "custom") {
    TANDEM_ASSIGN_OR_RETURN(choice.function, RequireString(value, "name"));
    return choice;
  }
  if (options.responses_web_search == WebSearchBehavior::kReject) {
    return RequestError("Server tools are not supported");
  }
  return choice;
}

}  // namespace tandem::recipe::internal
