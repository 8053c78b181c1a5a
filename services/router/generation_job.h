#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "admission.h"
#include "call_canceller.h"
#include "client_channel.h"
#include "dispatcher.h"
#include "openai_format.h"
#include "router_metrics.h"
#include "tandem/http/message.h"
#include "tandem/http/router.h"
#include "tandem/http/sse_writer.h"
#include "text_stream.h"
#include "token_latency.h"
#include "run_admitted.h"

namespace tandem::router {

// Everything one admitted, validated generation needs.
struct JobSetup {
  ResponseContext response;
  GenerationRequest request;
  std::shared_ptr<CallCanceller> canceller;
  std::unique_ptr<AdmissionTicket> ticket;
  std::unique_ptr<TextStream> text;
  bool include_usage = false;
  std::chrono::steady_clock::time_point arrived;
  RunDeps run;  // selector, dispatcher, model: where it runs once admitted
  const RouterMetrics* metrics = nullptr;
  std::string endpoint;  // metrics label
  absl::Duration sse_write_timeout = absl::Seconds(30);
};

// Runs one /v1/completions generation and turns its tokens into the response, whole or streamed.
class GenerationJob final : public TokenSink {
 public:
  explicit GenerationJob(JobSetup setup);

  // Non-streaming: blocks until the generation ends, then answers through `responder`. A client
  // that disconnects meanwhile cancels the generation.
  void RunToCompletion(std::shared_ptr<http::Responder> responder);
  // Streaming: the stream opens with the first token, so a failure before it is answered with
  // its own status (429, 503, ...). Then chunks, the final chunk, optional usage and [DONE]; or,
  // after a failure mid-stream, an error event.
  void RunStreaming(std::shared_ptr<http::Responder> responder);

  bool OnTokens(std::span<const std::int32_t> ids) override;

 private:
  absl::StatusOr<GenerationOutcome> Dispatch();
  v1::Usage ClientUsage(const GenerationOutcome& outcome) const;
  bool WriteEvent(const std::string& data);

  JobSetup setup_;
  bool streaming_ = false;
  std::unique_ptr<ClientChannel> channel_;
  bool sent_first_chunk_ = false;
  std::string full_text_;
  absl::Status decode_error_;
  TokenLatency latency_;
};

}  // namespace tandem::router
