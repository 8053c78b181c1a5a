#include "tandem/recipe/stream_processor.h"

#include <random>
#include <utility>

#include "absl/strings/str_format.h"
#include "stream/stream_processor_writer.h"

namespace tandem::recipe {
namespace {

std::function<std::string(int)> RandomToolCallIds() {
  auto engine = std::make_shared<std::mt19937_64>(std::random_device{}());
  return [engine](int index) {
    static constexpr char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    std::string id = absl::StrFormat("call_%02d_", index);
    std::uniform_int_distribution<int> pick(0, sizeof(kAlphabet) - 2);
    for (int i = 0; i < 24; ++i) id += kAlphabet[pick(*engine)];
    return id;
  };
}

}  // namespace

std::string DumpJson(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false,
                    nlohmann::ordered_json::error_handler_t::replace);
}

StreamProcessor::StreamProcessor(const ConversationRequest& request, std::string id,
                                 std::string model, std::int64_t created)
    : parser_(request.parsing), tool_call_id_(RandomToolCallIds()) {
  WriterContext context{&request, std::move(id), std::move(model), created,
                        request.parsing.thinking_initial_stage.has_value()};
  switch (request.protocol) {
    case Protocol::kChatCompletions:
      writer_ = MakeChatChunkWriter(context);
      break;
    case Protocol::kResponses:
      writer_ = MakeResponsesEventWriter(context);
      break;
    case Protocol::kMessages:
      writer_ = MakeMessagesEventWriter(context);
      break;
  }
}

StreamProcessor::~StreamProcessor() = default;

void StreamProcessor::SetToolCallIdGenerator(std::function<std::string(int)> generator) {
  tool_call_id_ = std::move(generator);
}

void StreamProcessor::SetThinkingSignature(std::string signature) {
  writer_->SetThinkingSignature(std::move(signature));
}

std::vector<OutputEvent> StreamProcessor::Ready(const PromptUsage& usage) {
  usage_.prompt = usage;
  std::vector<OutputEvent> out;
  writer_->Ready(usage, out);
  return out;
}

std::vector<OutputEvent> StreamProcessor::Push(absl::string_view text, int token_count) {
  std::vector<OutputEvent> out;
  if (finished_) return out;
  usage_.completion_tokens += token_count;
  const std::uint64_t piece = parser_.pieces();
  const bool reasoning = count_reasoning_tokens_ && parser_.in_reasoning();
  scratch_.clear();
  parser_.Push(text, scratch_);
  if (reasoning) {
    // A token counts as reasoning when some of its text was output as reasoning (not only the
    // newlines of </think> or stripped leading newlines). This matches the oracle's count for
    // token-id chunks except after a broken tag candidate, where it can be one higher.
    pending_tokens_ += token_count;
    if (parser_.pieces() > piece) {
      piece_tokens_.emplace_back(piece, pending_tokens_);
      pending_tokens_ = 0;
    }
    CountReasoning(scratch_);
  }
  Deliver(scratch_, out);
  if (parser_.stopped()) Complete(FinishReason::kStop, out);
  return out;
}

void StreamProcessor::CountReasoning(const std::vector<ParsedEvent>& events) {
  for (const ParsedEvent& event : events) {
    if (event.kind != ParsedKind::kReasoning) continue;
    while (!piece_tokens_.empty() && piece_tokens_.front().first <= event.piece) {
      if (piece_tokens_.front().first == event.piece) {
        usage_.reasoning_tokens =
            usage_.reasoning_tokens.value_or(0) + piece_tokens_.front().second;
      }
      piece_tokens_.pop_front();
    }
  }
  if (!parser_.in_reasoning()) piece_tokens_.clear();
}

std::vector<OutputEvent> StreamProcessor::Finish(FinishReason reason) {
  std::vector<OutputEvent> out;
  if (finished_) return out;
  scratch_.clear();
  parser_.Finish(scratch_);
  if (count_reasoning_tokens_) CountReasoning(scratch_);
  Deliver(scratch_, out);
  Complete(reason, out);
  return out;
}

void StreamProcessor::Deliver(const std::vector<ParsedEvent>& parsed,
                              std::vector<OutputEvent>& out) {
  static const std::string kNoId;
  for (const ParsedEvent& event : parsed) {
    if (event.kind == ParsedKind::kToolCallStart) {
      writer_->Parsed(event, tool_call_id_(tool_calls_started_++), out);
    } else {
      writer_->Parsed(event, kNoId, out);
    }
  }
}

void StreamProcessor::Complete(FinishReason reason, std::vector<OutputEvent>& out) {
  finished_ = true;
  if (count_reasoning_tokens_ && !usage_.reasoning_tokens) usage_.reasoning_tokens = 0;
  Outcome outcome{reason, parser_.tool_call_count() > 0, parser_.matched_stop()};
  writer_->Finish(outcome, usage_, out);
}

std::string StreamProcessor::FinalResponse() const { return writer_->FinalResponse(); }

std::optional<std::string> StreamProcessor::SseDoneData(Protocol protocol) {
  if (protocol == Protocol::kChatCompletions) return std::string("[DONE]");
  return std::nullopt;
}

}  // namespace tandem::recipe
