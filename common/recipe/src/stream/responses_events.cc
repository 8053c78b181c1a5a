// OpenAI Responses: the response.* stream events and the response object they accumulate to.
// Output items open lazily on their first delta and close when the next item opens or the
// response ends, as deepseek-recipe's generator does.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "stream/stream_processor_writer.h"

namespace tandem::recipe {
namespace {

using Json = nlohmann::ordered_json;

enum class ItemKind { kReasoning, kMessage, kFunctionCall };

struct Item {
  ItemKind kind;
  std::string id;
  std::string text = {};                       // reasoning or output text, or function arguments
  std::string call_id = {};                    // function call
  std::string name = {};                       // function call (local name inside its namespace)
  std::optional<std::string> name_space = {};  // function call of a namespace tool
  std::string status = "in_progress";
  std::string phase = "final_answer";  // message
};

class ResponsesEventWriter : public ProtocolWriter {
 public:
  explicit ResponsesEventWriter(const WriterContext& context) : context_(context) {}

  void Ready(const PromptUsage&, std::vector<OutputEvent>& out) override {
    Emit("response.created", Json{{"response", ResponseObject()}}, out);
    Emit("response.in_progress", Json{{"response", ResponseObject()}}, out);
  }

  void Parsed(const ParsedEvent& event, const std::string& call_id,
              std::vector<OutputEvent>& out) override {
    switch (event.kind) {
      case ParsedKind::kToolBlockStart:
        break;  // the answer item closes when a call opens
      case ParsedKind::kReasoning:
        Open(ItemKind::kReasoning, out);
        items_.back().text += event.text;
        EmitDelta("response.reasoning_text.delta", event.text, /*with_logprobs=*/false, out);
        break;
      case ParsedKind::kContent:
        Open(ItemKind::kMessage, out);
        items_.back().text += event.text;
        EmitDelta("response.output_text.delta", event.text, /*with_logprobs=*/true, out);
        break;
      case ParsedKind::kToolCallStart:
        CloseOpen("in_progress", /*before_call=*/true, out);
        items_.push_back(
            Item{ItemKind::kFunctionCall, absl::StrCat("fc_", context_.id, "_", items_.size())});
        items_.back().call_id = call_id;
        items_.back().name = event.text;
        SplitNamespace(items_.back());
        open_ = true;
        Emit("response.output_item.added",
             Json{{"item", ItemJson(items_.back())}, {"output_index", items_.size() - 1}}, out);
        break;
      case ParsedKind::kToolArguments: {
        if (!open_ || items_.back().kind != ItemKind::kFunctionCall) return;
        items_.back().text += event.text;
        Json data;
        data["delta"] = event.text;
        data["item_id"] = items_.back().id;
        data["output_index"] = items_.size() - 1;
        Emit("response.function_call_arguments.delta", std::move(data), out);
        break;
      }
    }
  }

  void Finish(const Outcome& outcome, const CompletionUsage& usage,
              std::vector<OutputEvent>& out) override {
    const bool complete = outcome.reason == FinishReason::kStop;
    CloseOpen(complete ? "completed" : "incomplete", /*before_call=*/false, out);
    status_ = complete ? "completed" : "incomplete";
    if (outcome.reason == FinishReason::kLength) incomplete_reason_ = "max_output_tokens";
    if (outcome.reason == FinishReason::kContentFilter) incomplete_reason_ = "content_filter";
    completed_at_ = absl::ToUnixSeconds(absl::Now());
    const std::int64_t prompt = usage.prompt.prompt_tokens;
    usage_ = Json::object();
    usage_["input_tokens"] = prompt;
    usage_["input_tokens_details"] = Json{{"cached_tokens", usage.prompt.prompt_cache_hit_tokens}};
    usage_["output_tokens"] = usage.completion_tokens;
    usage_["output_tokens_details"] =
        Json{{"reasoning_tokens", usage.reasoning_tokens.value_or(0)}};
    usage_["total_tokens"] = prompt + usage.completion_tokens;
    Emit(complete ? "response.completed" : "response.incomplete",
         Json{{"response", ResponseObject()}}, out);
  }

  std::string FinalResponse() const override { return DumpJson(ResponseObject()); }

 private:
  // Opens an item of `kind` unless the open item is one.
  void Open(ItemKind kind, std::vector<OutputEvent>& out) {
    if (open_ && items_.back().kind == kind) return;
    CloseOpen("completed", /*before_call=*/false, out);
    const char* prefix = kind == ItemKind::kReasoning ? "rs_" : "msg_";
    items_.push_back(Item{kind, absl::StrCat(prefix, context_.id, "_", items_.size())});
    open_ = true;
    const std::size_t index = items_.size() - 1;
    Emit("response.output_item.added",
         Json{{"item", ItemJson(items_.back())}, {"output_index", index}}, out);
    Json data;
    data["content_index"] = 0;
    data["item_id"] = items_.back().id;
    data["output_index"] = index;
    data["part"] = PartJson(items_.back(), "");
    Emit("response.content_part.added", std::move(data), out);
  }

  // Closes the open item. `status` is the status of a finished item ("in_progress" means
  // "completed": the next item opens); a message before a call becomes commentary.
  void CloseOpen(absl::string_view status, bool before_call, std::vector<OutputEvent>& out) {
    if (!open_) return;
    open_ = false;
    Item& item = items_.back();
    item.status = status == "in_progress" ? "completed" : std::string(status);
    if (item.kind == ItemKind::kMessage && before_call) item.phase = "commentary";
    const std::size_t index = items_.size() - 1;
    if (item.kind == ItemKind::kFunctionCall) {
      Json data;
      data["arguments"] = item.text;
      data["item_id"] = item.id;
      data["output_index"] = index;
      Emit("response.function_call_arguments.done", std::move(data), out);
    } else {
      Json done;
      done["content_index"] = 0;
      done["item_id"] = item.id;
      if (item.kind == ItemKind::kMessage) done["logprobs"] = Json::array();
      done["output_index"] = index;
      done["text"] = item.text;
      Emit(item.kind == ItemKind::kReasoning ? "response.reasoning_text.done"
                                             : "response.output_text.done",
           std::move(done), out);
      Json part;
      part["content_index"] = 0;
      part["item_id"] = item.id;
      part["output_index"] = index;
      part["part"] = PartJson(item, item.text);
      Emit("response.content_part.done", std::move(part), out);
    }
    Emit("response.output_item.done", Json{{"item", ItemJson(item)}, {"output_index", index}}, out);
  }

  void EmitDelta(const char* type, const std::string& text, bool with_logprobs,
                 std::vector<OutputEvent>& out) {
    Json data;
    data["content_index"] = 0;
    data["delta"] = text;
    data["item_id"] = items_.back().id;
    if (with_logprobs) data["logprobs"] = Json::array();
    data["output_index"] = items_.size() - 1;
    Emit(type, std::move(data), out);
  }

  // Events list "type" first, the other keys in alphabetical order, sequence_number among them.
  void Emit(const char* type, Json fields, std::vector<OutputEvent>& out) {
    Json event;
    event["type"] = type;
    bool numbered = false;
    for (auto& [key, value] : fields.items()) {
      if (!numbered && key > "sequence_number") {
        event["sequence_number"] = sequence_;
        numbered = true;
      }
      event[key] = std::move(value);
    }
    if (!numbered) event["sequence_number"] = sequence_;
    ++sequence_;
    out.push_back(OutputEvent{type, DumpJson(event)});
  }

  static Json PartJson(const Item& item, const std::string& text) {
    if (item.kind == ItemKind::kReasoning) return Json{{"type", "reasoning_text"}, {"text", text}};
    Json part;
    part["type"] = "output_text";
    part["annotations"] = Json::array();
    part["logprobs"] = Json::array();
    part["text"] = text;
    return part;
  }

  Json ItemJson(const Item& item) const {
    Json json;
    const bool done = item.status != "in_progress";
    switch (item.kind) {
      case ItemKind::kReasoning:
        json["type"] = "reasoning";
        json["id"] = item.id;
        json["status"] = item.status;
        json["content"] = done ? Json::array({PartJson(item, item.text)}) : Json::array();
        json["summary"] = Json::array();
        json["encrypted_content"] = absl::StrCat(context_.id, "-", IndexOf(item));
        break;
      case ItemKind::kMessage:
        json["type"] = "message";
        json["id"] = item.id;
        json["status"] = item.status;
        json["role"] = "assistant";
        json["phase"] = item.phase;
        json["content"] = done ? Json::array({PartJson(item, item.text)}) : Json::array();
        break;
      case ItemKind::kFunctionCall:
        json["type"] = "function_call";
        json["id"] = item.id;
        json["status"] = item.status;
        json["call_id"] = item.call_id;
        json["name"] = item.name;
        if (item.name_space) json["namespace"] = *item.name_space;
        json["arguments"] = done ? item.text : std::string();
        break;
    }
    return json;
  }

  // Namespace tools are rendered flat ("<namespace>__<name>"); responses report them split, as
  // the converter recorded in echo["namespace_tool_map"].
  void SplitNamespace(Item& item) const {
    const Json& echo = context_.request->echo;
    if (!echo.is_object()) return;
    auto map = echo.find("namespace_tool_map");
    if (map == echo.end() || !map->is_object()) return;
    auto origin = map->find(item.name);
    if (origin == map->end() || !origin->is_array() || origin->size() != 2 ||
        !(*origin)[0].is_string() || !(*origin)[1].is_string()) {
      return;
    }
    item.name_space = (*origin)[0].get<std::string>();
    item.name = (*origin)[1].get<std::string>();
  }

  std::size_t IndexOf(const Item& item) const {
    return static_cast<std::size_t>(&item - items_.data());
  }

  Json EchoOr(const char* key, Json fallback) const {
    const Json& echo = context_.request->echo;
    if (echo.is_object() && echo.contains(key)) return echo[key];
    return fallback;
  }

  Json ResponseObject() const {
    Json r;
    r["id"] = context_.id;
    r["object"] = "response";
    r["created_at"] = context_.created;
    r["status"] = status_;
    r["background"] = false;
    r["completed_at"] = completed_at_ ? Json(*completed_at_) : Json(nullptr);
    r["content_filters"] = nullptr;
    r["error"] = nullptr;
    r["frequency_penalty"] = 0.0;
    r["incomplete_details"] =
        incomplete_reason_.empty() ? Json(nullptr) : Json{{"reason", incomplete_reason_}};
    r["instructions"] = EchoOr("instructions", nullptr);
    r["max_output_tokens"] = EchoOr("max_output_tokens", nullptr);
    r["max_tool_calls"] = nullptr;
    r["model"] = context_.model;
    r["moderation"] = nullptr;
    Json output = Json::array();
    for (const Item& item : items_) {
      if (item.status != "in_progress") output.push_back(ItemJson(item));
    }
    r["output"] = std::move(output);
    r["parallel_tool_calls"] = EchoOr("parallel_tool_calls", true);
    r["presence_penalty"] = 0.0;
    r["previous_response_id"] = nullptr;
    r["prompt_cache_key"] = nullptr;
    r["prompt_cache_retention"] = nullptr;
    r["reasoning"] = EchoOr("reasoning", Json{{"effort", nullptr}, {"summary", nullptr}});
    r["safety_identifier"] = nullptr;
    r["service_tier"] = "default";
    r["store"] = false;
    r["temperature"] = EchoOr("temperature", 1.0);
    r["text"] = EchoOr("text", Json{{"format", Json{{"type", "text"}}}, {"verbosity", nullptr}});
    r["tool_choice"] = EchoOr("tool_choice", "auto");
    r["tools"] = EchoOr("tools", Json::array());
    r["top_logprobs"] = EchoOr("top_logprobs", 0);
    r["top_p"] = EchoOr("top_p", 1.0);
    r["truncation"] = "disabled";
    r["usage"] = usage_;
    r["user"] = EchoOr("user", nullptr);
    r["metadata"] = EchoOr("metadata", Json::object());
    return r;
  }

  WriterContext context_;
  std::vector<Item> items_;
  bool open_ = false;
  std::int64_t sequence_ = 0;
  std::string status_ = "in_progress";
  std::string incomplete_reason_;
  std::optional<std::int64_t> completed_at_;
  Json usage_ = nullptr;
};

}  // namespace

std::unique_ptr<ProtocolWriter> MakeResponsesEventWriter(const WriterContext& context) {
  return std::make_unique<ResponsesEventWriter>(context);
}

}  // namespace tandem::recipe
