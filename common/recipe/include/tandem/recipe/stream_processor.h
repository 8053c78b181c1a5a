#pragma once

// Generated text -> the protocol's stream events and final response, as deepseek-recipe's
// StreamProcessor + <Protocol>Response.accumulate produce them.
//
//   StreamProcessor processor(request, "chatcmpl-1", request.model, now);
//   Send(processor.Ready({.prompt_tokens = 812, .prompt_cache_hit_tokens = 768}));
//   for (token text) Send(processor.Push(text, 1));      // stops early on a stop sequence
//   Send(processor.Finish(FinishReason::kStop));
//   std::string body = processor.FinalResponse();        // the non-streaming response
//
// Per-token cost is the parser step plus one small delta object; nothing is re-serialised.

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "tandem/recipe/conversation.h"
#include "tandem/recipe/stream_parser.h"
#include "tandem/recipe/usage.h"

namespace tandem::recipe {

// One server-sent event: `event` is the SSE event name (empty for an unnamed data event).
struct OutputEvent {
  std::string event;
  std::string data;
};

class ProtocolWriter;

class StreamProcessor {
 public:
  StreamProcessor(const ConversationRequest& request, std::string id, std::string model,
                  std::int64_t created);
  ~StreamProcessor();
  StreamProcessor(const StreamProcessor&) = delete;
  StreamProcessor& operator=(const StreamProcessor&) = delete;

  // Tool call ids default to "call_NN_" + 24 random characters; tests make them predictable.
  void SetToolCallIdGenerator(std::function<std::string(int index)> generator);
  // Messages: the signature that ends each thinking block (default: the response id).
  void SetThinkingSignature(std::string signature);
  // Counts reasoning tokens (completion_tokens_details.reasoning_tokens), as the oracle does for
  // token-id chunks: meaningful when each Push is one decoded token (the router's decode loop).
  void CountReasoningTokens(bool enabled) { count_reasoning_tokens_ = enabled; }

  std::vector<OutputEvent> Ready(const PromptUsage& usage);
  std::vector<OutputEvent> Push(absl::string_view text, int token_count);
  // Idempotent; after a stop sequence ended the output it has nothing left to send.
  std::vector<OutputEvent> Finish(FinishReason reason);

  // A stop sequence or Finish completed the response.
  bool finished() const { return finished_; }
  // The accumulated response JSON (complete after Finish).
  std::string FinalResponse() const;

  // The data of the final SSE message ("[DONE]" for Chat Completions), if the protocol has one.
  static std::optional<std::string> SseDoneData(Protocol protocol);

 private:
  void Deliver(const std::vector<ParsedEvent>& parsed, std::vector<OutputEvent>& out);
  void CountReasoning(const std::vector<ParsedEvent>& events);
  void Complete(FinishReason reason, std::vector<OutputEvent>& out);

  StreamParser parser_;
  std::unique_ptr<ProtocolWriter> writer_;
  std::function<std::string(int)> tool_call_id_;
  CompletionUsage usage_;
  bool count_reasoning_tokens_ = false;
  // Token counts of pushed reasoning pieces not yet output (piece number, tokens).
  std::deque<std::pair<std::uint64_t, int>> piece_tokens_;
  int pending_tokens_ = 0;  // tokens of pushes that completed no piece yet
  bool finished_ = false;
  int tool_calls_started_ = 0;
  std::vector<ParsedEvent> scratch_;
};

}  // namespace tandem::recipe
