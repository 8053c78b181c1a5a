// Anthropic Messages: message_start / content_block_* / message_delta / message_stop events and
// the message they accumulate to. The thinking block opens with the stream (thinking mode) and
// ends with a signature delta; other blocks open on their first delta.

#include <string>
#include <utility>
#include <vector>

#include "stream/stream_processor_writer.h"

namespace tandem::recipe {
namespace {

using Json = nlohmann::ordered_json;

enum class BlockKind { kThinking, kText, kToolUse };

struct Block {
  BlockKind kind;
  std::string text = {};  // thinking, text, or tool input JSON text
  std::string id = {};    // tool_use
  std::string name = {};  // tool_use
};

class MessagesEventWriter : public ProtocolWriter {
 public:
  explicit MessagesEventWriter(const WriterContext& context)
      : context_(context), signature_(context.id) {}

  void SetThinkingSignature(std::string signature) override { signature_ = std::move(signature); }

  void Ready(const PromptUsage& usage, std::vector<OutputEvent>& out) override {
    prompt_ = usage;
    Json message = MessageObject(/*with_content=*/false);
    Emit("message_start", Json{{"type", "message_start"}, {"message", std::move(message)}}, out);
    if (context_.thinking) Open(Block{BlockKind::kThinking}, out);
  }

  void Parsed(const ParsedEvent& event, const std::string& call_id,
              std::vector<OutputEvent>& out) override {
    switch (event.kind) {
      case ParsedKind::kToolBlockStart:
        break;  // the open block closes when a call opens
      case ParsedKind::kReasoning:
        if (!open_ || blocks_.back().kind != BlockKind::kThinking)
          Open(Block{BlockKind::kThinking}, out);
        blocks_.back().text += event.text;
        Delta(Json{{"type", "thinking_delta"}, {"thinking", event.text}}, out);
        break;
      case ParsedKind::kContent:
        if (!open_ || blocks_.back().kind != BlockKind::kText) Open(Block{BlockKind::kText}, out);
        blocks_.back().text += event.text;
        Delta(Json{{"type", "text_delta"}, {"text", event.text}}, out);
        break;
      case ParsedKind::kToolCallStart:
        Open(Block{BlockKind::kToolUse, "", call_id, event.text}, out);
        break;
      case ParsedKind::kToolArguments:
        if (!open_ || blocks_.back().kind != BlockKind::kToolUse) return;
        blocks_.back().text += event.text;
        Delta(Json{{"type", "input_json_delta"}, {"partial_json", event.text}}, out);
        break;
    }
  }

  void Finish(const Outcome& outcome, const CompletionUsage& usage,
              std::vector<OutputEvent>& out) override {
    Close(out);
    output_tokens_ = usage.completion_tokens;
    if (outcome.reason == FinishReason::kLength) {
      stop_reason_ = "max_tokens";
    } else if (outcome.reason == FinishReason::kContentFilter) {
      stop_reason_ = "refusal";
    } else if (outcome.tool_calls) {
      stop_reason_ = "tool_use";
    } else if (outcome.stop_sequence) {
      stop_reason_ = "stop_sequence";
      stop_sequence_ = *outcome.stop_sequence;
    } else {
      stop_reason_ = "end_turn";
    }
    Json data;
    data["type"] = "message_delta";
    data["delta"] = Json{{"stop_reason", stop_reason_},
                         {"stop_sequence", stop_sequence_ ? Json(*stop_sequence_) : Json(nullptr)}};
    data["usage"] = UsageJson();
    Emit("message_delta", std::move(data), out);
    Emit("message_stop", Json{{"type", "message_stop"}}, out);
  }

  std::string FinalResponse() const override { return DumpJson(MessageObject(true)); }

 private:
  void Open(Block block, std::vector<OutputEvent>& out) {
    Close(out);
    blocks_.push_back(std::move(block));
    open_ = true;
    Json data;
    data["type"] = "content_block_start";
    data["index"] = blocks_.size() - 1;
    data["content_block"] = BlockJson(blocks_.back(), /*final=*/false);
    Emit("content_block_start", std::move(data), out);
    if (!pinged_) {
      pinged_ = true;
      Emit("ping", Json{{"type", "ping"}}, out);
    }
  }

  void Close(std::vector<OutputEvent>& out) {
    if (!open_) return;
    open_ = false;
    if (blocks_.back().kind == BlockKind::kThinking) {
      Delta(Json{{"type", "signature_delta"}, {"signature", signature_}}, out);
    }
    Json data;
    data["type"] = "content_block_stop";
    data["index"] = blocks_.size() - 1;
    Emit("content_block_stop", std::move(data), out);
  }

  void Delta(Json delta, std::vector<OutputEvent>& out) {
    Json data;
    data["type"] = "content_block_delta";
    data["index"] = blocks_.size() - 1;
    data["delta"] = std::move(delta);
    Emit("content_block_delta", std::move(data), out);
  }

  void Emit(const char* name, const Json& data, std::vector<OutputEvent>& out) {
    out.push_back(OutputEvent{name, DumpJson(data)});
  }

  Json BlockJson(const Block& block, bool final) const {
    Json json;
    switch (block.kind) {
      case BlockKind::kThinking:
        json["type"] = "thinking";
        json["thinking"] = final ? block.text : "";
        json["signature"] = final ? signature_ : "";
        break;
      case BlockKind::kText:
        json["type"] = "text";
        json["text"] = final ? block.text : "";
        break;
      case BlockKind::kToolUse: {
        json["type"] = "tool_use";
        json["id"] = block.id;
        json["name"] = block.name;
        Json input = Json::object();
        if (final) {
          Json parsed = Json::parse(block.text, nullptr, /*allow_exceptions=*/false);
          if (parsed.is_object()) input = std::move(parsed);
        }
        json["input"] = std::move(input);
        break;
      }
    }
    return json;
  }

  Json UsageJson() const {
    Json usage;
    usage["input_tokens"] = prompt_.prompt_tokens - prompt_.prompt_cache_hit_tokens;
    usage["cache_creation_input_tokens"] = 0;
    usage["cache_read_input_tokens"] = prompt_.prompt_cache_hit_tokens;
    usage["output_tokens"] = output_tokens_;
    usage["service_tier"] = "standard";
    return usage;
  }

  Json MessageObject(bool with_content) const {
    Json message;
    message["id"] = context_.id;
    message["type"] = "message";
    message["role"] = "assistant";
    message["model"] = context_.model;
    Json content = Json::array();
    if (with_content) {
      for (const Block& block : blocks_) content.push_back(BlockJson(block, /*final=*/true));
    }
    message["content"] = std::move(content);
    message["stop_reason"] = stop_reason_.empty() ? Json(nullptr) : Json(stop_reason_);
    message["stop_sequence"] = stop_sequence_ ? Json(*stop_sequence_) : Json(nullptr);
    message["usage"] = UsageJson();
    return message;
  }

  WriterContext context_;
  std::string signature_;
  PromptUsage prompt_;
  std::vector<Block> blocks_;
  bool open_ = false;
  bool pinged_ = false;
  std::int64_t output_tokens_ = 0;
  std::string stop_reason_;
  std::optional<std::string> stop_sequence_;
};

}  // namespace

std::unique_ptr<ProtocolWriter> MakeMessagesEventWriter(const WriterContext& context) {
  return std::make_unique<MessagesEventWriter>(context);
}

}  // namespace tandem::recipe
