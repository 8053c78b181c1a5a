#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "admission.h"
#include "call_canceller.h"
#include "client_channel.h"
#include "dispatcher.h"
#include "router_metrics.h"
#include "tandem/recipe/conversation.h"
#include "tandem/recipe/stream_processor.h"
#include "text_stream.h"
#include "token_latency.h"
#include "run_admitted.h"

namespace tandem::router {

// Everything one admitted, converted protocol request (Chat Completions, Responses, Messages)
// needs to run.
struct ProtocolJobSetup {
  recipe::ConversationRequest request;
  std::string response_id;
  std::string model;  // echoed in responses
  std::int64_t created_unix_s = 0;
  GenerationRequest generation;
  std::shared_ptr<CallCanceller> canceller;
  std::unique_ptr<AdmissionTicket> ticket;
  std::unique_ptr<TextStream> text;  // ids -> text; stop ids end it, stop sequences are the parser's
  std::chrono::steady_clock::time_point arrived;
  RunDeps run;  // selector, dispatcher, model: where it runs once admitted
  const RouterMetrics* metrics = nullptr;
  std::string endpoint;  // metrics label
  absl::Duration sse_write_timeout = absl::Seconds(30);
};

// Runs one generation and turns its tokens into the protocol's response through deepseek-recipe
// semantics (recipe::StreamProcessor): reasoning, content, tool calls, stop sequences, usage.
class ProtocolJob final : public TokenSink {
 public:
  explicit ProtocolJob(ProtocolJobSetup setup);

  void RunToCompletion(std::shared_ptr<http::Responder> responder);
  // The stream opens with the first token, so a failure before it keeps its own HTTP status.
  void RunStreaming(std::shared_ptr<http::Responder> responder);

  bool OnTokens(std::span<const std::int32_t> ids) override;
  void OnPromptCached(std::uint32_t cached_prompt_tokens) override;

 private:
  absl::StatusOr<GenerationOutcome> Dispatch();
  // Ready once, with the cache hits the workers reported before the first token.
  void EnsureReady();
  // The rest of the output and the end of the response; false when the client is gone.
  bool Complete(const GenerationOutcome& outcome);
  bool Send(std::vector<recipe::OutputEvent> events);
  recipe::FinishReason FinishOf(const GenerationOutcome& outcome) const;
  http::Response ErrorResponse(const absl::Status& status) const;

  ProtocolJobSetup setup_;
  recipe::StreamProcessor processor_;
  TokenLatency latency_;
  bool streaming_ = false;
  std::unique_ptr<ClientChannel> channel_;
  bool ready_ = false;
  std::optional<std::uint32_t> cached_prompt_tokens_;
  absl::Status decode_error_;
};

}  // namespace tandem::router
