// Chat Completions: chat.completion.chunk objects and the chat.completion they accumulate to.

#include <string>
#include <utility>
#include <vector>

#include "stream/stream_processor_writer.h"

namespace tandem::recipe {
namespace {

using Json = nlohmann::ordered_json;

absl::string_view ChatFinishReason(const Outcome& outcome) {
  if (outcome.reason == FinishReason::kLength) return "length";
  if (outcome.reason == FinishReason::kContentFilter) return "content_filter";
  return outcome.tool_calls ? "tool_calls" : "stop";
}

Json ChatUsage(const CompletionUsage& usage) {
  const std::int64_t prompt = usage.prompt.prompt_tokens;
  const std::int64_t hit = usage.prompt.prompt_cache_hit_tokens;
  Json json;
  json["prompt_tokens"] = prompt;
  json["completion_tokens"] = usage.completion_tokens;
  json["total_tokens"] = prompt + usage.completion_tokens;
  json["prompt_tokens_details"] = Json{{"cached_tokens", hit}};
  if (usage.reasoning_tokens) {
    json["completion_tokens_details"] = Json{{"reasoning_tokens", *usage.reasoning_tokens}};
  }
  json["prompt_cache_hit_tokens"] = hit;
  json["prompt_cache_miss_tokens"] = prompt - hit;
  return json;
}

struct ToolCallState {
  std::string id;
  std::string name;
  std::string arguments;
};

class ChatChunkWriter : public ProtocolWriter {
 public:
  explicit ChatChunkWriter(const WriterContext& context)
      : context_(context),
        // A stream that declined usage leaves the key out until the final chunk.
        usage_key_(!context.request->stream || context.request->include_usage) {}

  void Ready(const PromptUsage&, std::vector<OutputEvent>& out) override {
    Json delta;
    delta["role"] = "assistant";
    if (context_.thinking) {
      delta["content"] = nullptr;
      delta["reasoning_content"] = "";
    } else {
      delta["content"] = "";
    }
    out.push_back(Chunk(std::move(delta), nullptr, nullptr));
  }

  void Parsed(const ParsedEvent& event, const std::string& call_id,
              std::vector<OutputEvent>& out) override {
    Json delta;
    switch (event.kind) {
      case ParsedKind::kToolBlockStart:
        return;
      case ParsedKind::kReasoning:
        reasoning_ += event.text;
        delta["content"] = nullptr;
        delta["reasoning_content"] = event.text;
        break;
      case ParsedKind::kContent:
        content_ += event.text;
        delta["content"] = event.text;
        if (context_.thinking) delta["reasoning_content"] = nullptr;
        break;
      case ParsedKind::kToolCallStart: {
        tool_calls_.push_back(ToolCallState{call_id, event.text, ""});
        Json call;
        call["index"] = tool_calls_.size() - 1;
        call["id"] = call_id;
        call["type"] = "function";
        call["function"] = Json{{"name", event.text}, {"arguments", ""}};
        delta["tool_calls"] = Json::array({std::move(call)});
        break;
      }
      case ParsedKind::kToolArguments: {
        if (tool_calls_.empty()) return;
        tool_calls_.back().arguments += event.text;
        Json call;
        call["index"] = tool_calls_.size() - 1;
        call["function"] = Json{{"arguments", event.text}};
        delta["tool_calls"] = Json::array({std::move(call)});
        break;
      }
    }
    out.push_back(Chunk(std::move(delta), nullptr, nullptr));
  }

  void Finish(const Outcome& outcome, const CompletionUsage& usage,
              std::vector<OutputEvent>& out) override {
    finish_reason_ = std::string(ChatFinishReason(outcome));
    usage_ = ChatUsage(usage);
    Json delta;
    delta["content"] = "";
    if (context_.thinking) delta["reasoning_content"] = nullptr;
    out.push_back(Chunk(std::move(delta), finish_reason_, usage_));
  }

  std::string FinalResponse() const override {
    Json message;
    message["role"] = "assistant";
    message["content"] = content_;
    if (context_.thinking) message["reasoning_content"] = reasoning_;
    if (!tool_calls_.empty()) {
      Json calls = Json::array();
      for (std::size_t i = 0; i < tool_calls_.size(); ++i) {
        Json call;
        call["index"] = i;
        call["id"] = tool_calls_[i].id;
        call["type"] = "function";
        call["function"] =
            Json{{"name", tool_calls_[i].name}, {"arguments", tool_calls_[i].arguments}};
        calls.push_back(std::move(call));
      }
      message["tool_calls"] = std::move(calls);
    }
    Json choice;
    choice["index"] = 0;
    choice["message"] = std::move(message);
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = finish_reason_.empty() ? Json(nullptr) : Json(finish_reason_);
    Json response;
    response["id"] = context_.id;
    response["object"] = "chat.completion";
    response["created"] = context_.created;
    response["model"] = context_.model;
    response["choices"] = Json::array({std::move(choice)});
    response["usage"] = usage_;
    response["system_fingerprint"] = nullptr;
    return DumpJson(response);
  }

 private:
  OutputEvent Chunk(Json delta, const Json& finish_reason, const Json& usage) const {
    Json choice;
    choice["index"] = 0;
    choice["delta"] = std::move(delta);
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = finish_reason;
    Json chunk;
    chunk["id"] = context_.id;
    chunk["object"] = "chat.completion.chunk";
    chunk["created"] = context_.created;
    chunk["model"] = context_.model;
    chunk["system_fingerprint"] = nullptr;
    chunk["choices"] = Json::array({std::move(choice)});
    if (usage_key_ || !usage.is_null()) chunk["usage"] = usage;
    return OutputEvent{"", DumpJson(chunk)};
  }

  WriterContext context_;
  bool usage_key_;
  std::string reasoning_;
  std::string content_;
  std::vector<ToolCallState> tool_calls_;
  std::string finish_reason_;
  Json usage_ = nullptr;
};

}  // namespace

std::unique_ptr<ProtocolWriter> MakeChatChunkWriter(const WriterContext& context) {
  return std::make_unique<ChatChunkWriter>(context);
}

}  // namespace tandem::recipe
