// DeepSeek V4 / V4.1 prompt rendering. The rules (checked against deepseek-recipe 0.2.0):
// - V4 writes no system token: every system message's text (non-empty ones, joined by "\n\n")
//   goes right after BOS, wherever it appeared. V4.1 writes each system message as a
//   <｜System｜> turn in place; the conversation-level additions go to the first message when it
//   is a system message, else to a system turn created in front.
// - Conversation-level additions, in order: the effort instruction (thinking mode), the system
//   text, the tool section (tools and tool_choice != none), the response-format section.
// - Consecutive user and tool messages share one <｜User｜> turn, joined by "\n\n"; tool results
//   are reordered into the order of the calling assistant's tool_calls.
// - Past reasoning is rendered only while tools are in play (V4.1: and thinking mode is on);
//   otherwise an assistant turn opens with </think>.
// - A final assistant message with `prefix` is continued: no end-of-sentence, no new turn.
// - A latest_reminder message is its own <｜latest_reminder｜> turn (V4.1: the first of a run).
#include <algorithm>
#include <climits>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "render/render_builder.h"
#include "render/render_deepseek_templates.h"
#include "render/render_json.h"
#include "tandem/recipe/render.h"

namespace tandem::recipe {
namespace {

using internal::JsonStyle;
using internal::PromptBuilder;

class DeepseekRenderer {
 public:
  DeepseekRenderer(const Conversation& conversation, ModelVersion version)
      : c_(conversation), v41_(version == ModelVersion::kDeepseekV41) {
    dsml_ = v41_ ? internal::DsmlNames{" calls", " invoke", " parameter"}
                 : internal::DsmlNames{"tool_calls", "invoke", "parameter"};
    json_style_ = v41_ ? JsonStyle::kPrompt : JsonStyle::kPromptV4;
    tools_active_ = !c_.tools.empty() && c_.tool_choice != ToolChoice::kNone;
  }

  RenderedPrompt Render() {
    b_.Special(kBosToken);
    if (v41_) {
      RenderV41Front();
    } else {
      RenderV4SystemBlock();
    }
    const std::vector<const Message*> order = TurnOrder();
    bool in_user_turn = false;
    for (std::size_t i = 0; i < order.size(); ++i) {
      const Message& m = *order[i];
      const bool last = i + 1 == order.size();
      switch (m.role) {
        case Role::kSystem:
          b_.Special(kSystemToken);
          if (&m == &c_.messages.front()) {
            AppendFrontAdditions(m.content);
          } else {
            b_.Text(m.content);
          }
          AppendUpdatedToolSchemas(m);
          in_user_turn = false;
          break;
        case Role::kUser:
        case Role::kTool:
          if (!v41_) {
            i = RenderV4UserTurn(order, i);
            in_user_turn = false;
            break;
          }
          if (in_user_turn) {
            b_.Text("\n\n");
          } else {
            b_.Special(kUserToken);
          }
          if (m.role == Role::kTool) b_.Text(internal::kToolResultOpen);
          b_.TextWithImages(m.content, m.image_sources.size(), m.image_offsets);
          if (m.role == Role::kTool) b_.Text(internal::kToolResultClose);
          in_user_turn = true;
          break;
        case Role::kLatestReminder:
          // V4.1 keeps only the first of consecutive reminders.
          if (v41_ && i > 0 && order[i - 1]->role == Role::kLatestReminder) break;
          b_.Special(kLatestReminderToken);
          b_.Text(m.content);
          in_user_turn = false;
          break;
        case Role::kAssistant:
          RenderAssistant(m, last && m.prefix);
          in_user_turn = false;
          break;
      }
    }
    const bool continues_prefix =
        !order.empty() && order.back()->role == Role::kAssistant && order.back()->prefix;
    if (!continues_prefix) RenderGenerationPrompt();
    return b_.Finish();
  }

 private:
  std::string EffortText() const {
    if (!c_.thinking_mode) return "";
    const ReasoningEffort effort = c_.reasoning_effort.value_or(ReasoningEffort::kHigh);
    if (!v41_) {
      if (effort == ReasoningEffort::kLow) return "";
      return std::string(effort == ReasoningEffort::kMax ? internal::kV4EffortMax
                                                         : internal::kV4EffortHigh);
    }
    const char* level = effort == ReasoningEffort::kLow   ? "50"
                        : effort == ReasoningEffort::kMax ? "100"
                                                          : "75";
    return absl::StrCat(internal::kV41EffortPrefix, level, internal::kV41EffortSuffix);
  }

  bool HasFormatSection() const {
    return c_.response_format == ResponseFormat::kJsonObject ||
           c_.response_format == ResponseFormat::kJsonSchema;
  }

  void AppendToolSchemaLines(const std::vector<ToolDefinition>& tools) {
    for (std::size_t i = 0; i < tools.size(); ++i) {
      if (i > 0) b_.Text("\n");
      nlohmann::ordered_json line = nlohmann::ordered_json::object();
      line["name"] = tools[i].name;
      line["description"] = tools[i].description.value_or("");
      line["parameters"] = tools[i].parameters;
      b_.Text(internal::ToJson(line, json_style_));
    }
  }

  // The tool section and the response-format section.
  void AppendSections() {
    if (tools_active_) {
      b_.Template(internal::ToolsPreamble(dsml_));
      AppendToolSchemaLines(c_.tools);
      b_.Template(internal::kToolsPostamble);
    }
    if (c_.response_format == ResponseFormat::kJsonObject) {
      if (v41_) {
        b_.Template(internal::kSchemaFormat);
        b_.Template(internal::kV41JsonObjectSchema);
      } else {
        b_.Template(internal::kV4JsonObjectFormat);
      }
    } else if (c_.response_format == ResponseFormat::kJsonSchema) {
      b_.Template(internal::kSchemaFormat);
      b_.Text(internal::ToJson(c_.response_schema.value_or(nullptr), json_style_));
    }
  }

  void RenderV4SystemBlock() {
    b_.Template(EffortText());
    bool first = true;
    for (const Message& m : c_.messages) {
      if (m.role != Role::kSystem || m.content.empty()) continue;
      if (!first) b_.Text("\n\n");
      b_.Text(m.content);
      first = false;
    }
    AppendSections();
  }

  // Effort, system text, sections: what the first system turn of V4.1 carries.
  void AppendFrontAdditions(absl::string_view system_text) {
    b_.Template(EffortText());
    b_.Text(system_text);
    AppendSections();
  }

  void RenderV41Front() {
    if (!c_.messages.empty() && c_.messages.front().role == Role::kSystem) return;  // in the loop
    const bool needed =
        tools_active_ || HasFormatSection() || (!c_.messages.empty() && !EffortText().empty());
    if (!needed) return;
    b_.Special(kSystemToken);
    AppendFrontAdditions("");
  }

  void AppendUpdatedToolSchemas(const Message& system) {
    if (!v41_ || !system.tools.has_value() || system.tools->empty()) return;
    b_.Template(internal::kUpdatedToolSchemas);
    AppendToolSchemaLines(*system.tools);
  }

  // The messages in render order: V4 drops system messages (already written up front), and each
  // run of user/tool messages has its tool results in the calling assistant's call order.
  std::vector<const Message*> TurnOrder() const {
    std::vector<const Message*> out;
    for (const Message& m : c_.messages) {
      if (v41_ || m.role != Role::kSystem) out.push_back(&m);
    }
    absl::flat_hash_map<std::string, int> call_order;
    for (std::size_t i = 0; i < out.size();) {
      const Message& m = *out[i];
      if (m.role == Role::kAssistant && m.tool_calls.has_value() && !m.tool_calls->empty()) {
        call_order.clear();
        const std::vector<ToolCall> calls = CallsInRenderOrder(*m.tool_calls);
        for (std::size_t k = 0; k < calls.size(); ++k) {
          call_order.try_emplace(calls[k].id, static_cast<int>(k));
        }
      }
      if (m.role != Role::kUser && m.role != Role::kTool) {
        ++i;
        continue;
      }
      std::size_t end = i;
      std::vector<std::size_t> slots;
      for (; end < out.size() && (out[end]->role == Role::kUser || out[end]->role == Role::kTool);
           ++end) {
        // V4.1 leaves a result without a call id where it is; V4 sorts it first.
        if (out[end]->role == Role::kTool && (!v41_ || out[end]->tool_call_id.has_value())) {
          slots.push_back(end);
        }
      }
      if (slots.size() > 1 && !call_order.empty()) {
        auto key = [&](const Message* t) {
          if (!t->tool_call_id.has_value()) return -1;
          auto it = call_order.find(*t->tool_call_id);
          if (it == call_order.end()) return v41_ ? 0 : INT_MAX;
          return it->second;
        };
        std::vector<const Message*> results;
        for (std::size_t s : slots) results.push_back(out[s]);
        std::stable_sort(results.begin(), results.end(),
                         [&](const Message* a, const Message* b) { return key(a) < key(b); });
        for (std::size_t n = 0; n < slots.size(); ++n) out[slots[n]] = results[n];
      }
      i = end;
    }
    return out;
  }

  // V4 writes a run of user and tool messages as one turn: the tool results (already in call
  // order) first, then the non-empty user texts, each part separated by a blank line. Returns
  // the index of the run's last message.
  std::size_t RenderV4UserTurn(const std::vector<const Message*>& order, std::size_t begin) {
    std::size_t end = begin;
    while (end < order.size() &&
           (order[end]->role == Role::kUser || order[end]->role == Role::kTool)) {
      ++end;
    }
    b_.Special(kUserToken);
    bool any_tool = false;
    for (std::size_t k = begin; k < end; ++k) {
      if (order[k]->role != Role::kTool) continue;
      if (any_tool) b_.Text("\n\n");
      b_.Text(internal::kToolResultOpen);
      b_.TextWithImages(order[k]->content, order[k]->image_sources.size(), order[k]->image_offsets);
      b_.Text(internal::kToolResultClose);
      any_tool = true;
    }
    bool any_text = false;
    for (std::size_t k = begin; k < end; ++k) {
      if (order[k]->role != Role::kUser) continue;
      if (any_tool && !any_text) b_.Text("\n\n");
      if (!any_text) any_text = true;
      if (order[k]->content.empty()) continue;
      if (written_user_text_) b_.Text("\n\n");
      b_.TextWithImages(order[k]->content, order[k]->image_sources.size(), order[k]->image_offsets);
      written_user_text_ = true;
    }
    written_user_text_ = false;
    return end - 1;
  }

  void RenderAssistant(const Message& m, bool continued) {
    b_.Special(kAssistantToken);
    if (continued) {
      RenderContinuedReasoning(m);
    } else {
      const bool keep_reasoning = tools_active_ && (!v41_ || c_.thinking_mode);
      if (keep_reasoning && (v41_ || m.reasoning_content.has_value())) {
        b_.Special(kThinkingStartToken);
        b_.Text(m.reasoning_content.value_or(""));
      }
      b_.Special(kThinkingEndToken);
      b_.Text(m.content);
    }
    if (m.tool_calls.has_value() && !m.tool_calls->empty()) RenderToolCalls(*m.tool_calls);
    if (!continued) b_.Special(kEosToken);
  }

  // A prefix continuation: the reasoning stays open while there is no answer text yet.
  void RenderContinuedReasoning(const Message& m) {
    const bool has_content = !m.content.empty();
    if (v41_) {
      if (c_.thinking_mode) {
        b_.Special(kThinkingStartToken);
        b_.Text(m.reasoning_content.value_or(""));
        if (!has_content) return;
      }
      b_.Special(kThinkingEndToken);
      b_.Text(m.content);
      return;
    }
    if (m.reasoning_content.has_value()) {
      b_.Special(kThinkingStartToken);
      b_.Text(*m.reasoning_content);
      if (c_.thinking_mode && !has_content) return;
    } else if (c_.thinking_mode && !has_content) {
      return;
    }
    b_.Special(kThinkingEndToken);
    b_.Text(m.content);
  }

  void RenderParameter(absl::string_view name, bool is_string, absl::string_view value) {
    b_.Template(absl::StrCat("<｜DSML｜", dsml_.parameter, " name=\""));
    b_.Text(name);
    b_.Text(is_string ? "\" string=\"true\">" : "\" string=\"false\">");
    b_.Text(value);
    b_.Template(absl::StrCat("</｜DSML｜", dsml_.parameter, ">"));
  }

  // V4 writes a turn's calls (and so their results) sorted by call id, byte order; V4.1 keeps the
  // order the assistant made them in.
  std::vector<ToolCall> CallsInRenderOrder(const std::vector<ToolCall>& calls) const {
    std::vector<ToolCall> ordered = calls;
    if (!v41_) {
      std::stable_sort(ordered.begin(), ordered.end(),
                       [](const ToolCall& a, const ToolCall& b) { return a.id < b.id; });
    }
    return ordered;
  }

  void RenderToolCalls(const std::vector<ToolCall>& unordered) {
    const std::vector<ToolCall> calls = CallsInRenderOrder(unordered);
    b_.Template(absl::StrCat("\n\n<｜DSML｜", dsml_.calls, ">\n"));
    for (std::size_t k = 0; k < calls.size(); ++k) {
      if (k > 0) b_.Text("\n");
      b_.Template(absl::StrCat("<｜DSML｜", dsml_.invoke, " name=\""));
      b_.Text(calls[k].name);
      b_.Text("\">\n");
      const auto args =
          nlohmann::ordered_json::parse(calls[k].arguments, nullptr, /*allow_exceptions=*/false);
      std::size_t written = 0;  // V4.1 separates parameters, V4 ends each with a newline
      auto separate = [&] {
        if (v41_ && written > 0) b_.Text("\n");
      };
      if (args.is_object()) {
        for (const auto& [key, value] : args.items()) {
          separate();
          if (value.is_string()) {
            RenderParameter(key, true, value.get_ref<const std::string&>());
          } else {
            RenderParameter(key, false, internal::ToJson(value, json_style_));
          }
          if (!v41_) b_.Text("\n");
          ++written;
        }
      } else {
        RenderParameter("arguments", true, calls[k].arguments);
        if (!v41_) b_.Text("\n");
        ++written;
      }
      if (v41_) b_.Text("\n");
      b_.Template(absl::StrCat("</｜DSML｜", dsml_.invoke, ">"));
    }
    b_.Template(absl::StrCat("\n</｜DSML｜", dsml_.calls, ">"));
  }

  void RenderGenerationPrompt() {
    b_.Special(kAssistantToken);
    b_.Special(c_.thinking_mode ? kThinkingStartToken : kThinkingEndToken);
    if (c_.tool_choice == ToolChoice::kRequired && !c_.tools.empty()) {
      b_.Template(absl::StrCat("\n\n<｜DSML｜", dsml_.calls, ">\n"));
    }
  }

  const Conversation& c_;
  const bool v41_;
  internal::DsmlNames dsml_;
  JsonStyle json_style_;
  bool tools_active_ = false;
  bool written_user_text_ = false;  // within RenderV4UserTurn
  PromptBuilder b_;
};

}  // namespace

RenderedPrompt RenderConversation(const Conversation& conversation, ModelVersion version) {
  return DeepseekRenderer(conversation, version).Render();
}

}  // namespace tandem::recipe
