// Model output through the output parser and the protocol writers, as the router streams it.
// Input: one byte choosing the protocol and finish reason, a request body (JSON) whose conversion
// sets the parsing options (thinking, tools, JSON mode, stop sequences), then '\0', then the
// generated text with '\x01' between the pieces the decode loop would push.
#include <cstdint>
#include <vector>

#include "fuzz_util.h"
#include "nlohmann/json.hpp"
#include "recipe_request.h"
#include "tandem/recipe/stream_parser.h"
#include "tandem/recipe/stream_processor.h"

using tandem::recipe::ConversationRequest;
using tandem::recipe::Protocol;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t mode = data[0];
  absl::string_view rest = tandem::fuzz::AsText(data + 1, size - 1);
  const std::size_t split = rest.find('\0');
  if (split == absl::string_view::npos) return 0;
  const auto protocol = static_cast<Protocol>(mode % 3);
  absl::StatusOr<ConversationRequest> request =
      tandem::fuzz::ConvertBody(protocol, rest.substr(0, split));
  if (!request.ok()) return 0;
  const std::vector<absl::string_view> pieces =
      tandem::fuzz::Split(rest.substr(split + 1), '\x01');

  // The parser alone: tool-call arguments only ever follow the start of a call.
  tandem::recipe::StreamParser parser(request->parsing);
  std::vector<tandem::recipe::ParsedEvent> events;
  for (absl::string_view piece : pieces) parser.Push(piece, events);
  parser.Finish(events);
  bool in_call = false;
  for (const auto& event : events) {
    if (event.kind == tandem::recipe::ParsedKind::kToolCallStart) in_call = true;
    if (event.kind == tandem::recipe::ParsedKind::kToolArguments && !in_call) __builtin_trap();
  }

  // Every event a client parses must be JSON, whatever the model wrote.
  auto check = [](const std::vector<tandem::recipe::OutputEvent>& out) {
    for (const auto& event : out) {
      if (!event.data.empty() && event.data != "[DONE]" && !nlohmann::json::accept(event.data)) {
        __builtin_trap();
      }
    }
  };
  tandem::recipe::StreamProcessor processor(*request, "fuzz-1", request->model, 1700000000);
  processor.SetToolCallIdGenerator([](int index) { return "call_" + std::to_string(index); });
  check(processor.Ready({.prompt_tokens = 7, .prompt_cache_hit_tokens = 3}));
  for (absl::string_view piece : pieces) {
    if (processor.finished()) break;  // the router stops decoding at a stop sequence
    check(processor.Push(piece, 1));
  }
  check(processor.Finish(static_cast<tandem::recipe::FinishReason>((mode / 3) % 3)));
  if (!nlohmann::json::accept(processor.FinalResponse())) __builtin_trap();
  return 0;
}
