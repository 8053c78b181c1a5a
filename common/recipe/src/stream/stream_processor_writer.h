#pragma once

// The protocol side of StreamProcessor: one writer per protocol turns parsed events into that
// protocol's stream events and keeps the final response they accumulate to.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tandem/recipe/conversation.h"
#include "tandem/recipe/stream_parser.h"
#include "tandem/recipe/stream_processor.h"
#include "tandem/recipe/usage.h"

namespace tandem::recipe {

struct Outcome {
  FinishReason reason = FinishReason::kStop;
  bool tool_calls = false;
  std::optional<std::string> stop_sequence;
};

class ProtocolWriter {
 public:
  virtual ~ProtocolWriter() = default;
  virtual void Ready(const PromptUsage& usage, std::vector<OutputEvent>& out) = 0;
  // `call_id` is set for kToolCallStart.
  virtual void Parsed(const ParsedEvent& event, const std::string& call_id,
                      std::vector<OutputEvent>& out) = 0;
  virtual void Finish(const Outcome& outcome, const CompletionUsage& usage,
                      std::vector<OutputEvent>& out) = 0;
  virtual std::string FinalResponse() const = 0;
  // Messages only; other protocols have no thinking signature.
  virtual void SetThinkingSignature(std::string /*signature*/) {}
};

struct WriterContext {
  const ConversationRequest* request;
  std::string id;
  std::string model;
  std::int64_t created;
  bool thinking;  // the request is in thinking mode
};

std::unique_ptr<ProtocolWriter> MakeChatChunkWriter(const WriterContext& context);
std::unique_ptr<ProtocolWriter> MakeResponsesEventWriter(const WriterContext& context);
std::unique_ptr<ProtocolWriter> MakeMessagesEventWriter(const WriterContext& context);

// Compact JSON as the oracle prints it (serde_json: no spaces, UTF-8 kept, floats as x.0).
std::string DumpJson(const nlohmann::ordered_json& value);

}  // namespace tandem::recipe
