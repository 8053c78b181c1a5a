#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "call_canceller.h"
#include "router_metrics.h"
#include "tandem/v1/worker.pb.h"
#include "worker_registry.h"
#include "worker_selector.h"

namespace tandem::router {

struct GenerationRequest {
  std::string request_id;
  std::vector<std::int32_t> prompt_ids;
  v1::SamplingParams sampling;
  std::chrono::system_clock::time_point deadline;
  std::string traffic_class;  // chat, agent (KV retention on the workers); empty: their default
};

struct GenerationOutcome {
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
  // completion_tokens counts every token the workers generated (a disaggregated request's first
  // token included); cached_prompt_tokens comes from whichever worker computed the prompt.
  v1::Usage usage;
};

// Receives a generation's tokens as they arrive, on the dispatching thread.
class TokenSink {
 public:
  virtual ~TokenSink() = default;
  // False ends the generation early with FINISH_REASON_STOP (a stop sequence matched); the
  // workers are told to stop.
  virtual bool OnTokens(std::span<const std::int32_t> ids) = 0;
  // How many prompt tokens the KV cache served, before the first token: from the prefill's answer
  // (disaggregated) or the combined worker's first message. Not called by a worker that does not
  // report it.
  virtual void OnPromptCached(std::uint32_t /*cached_prompt_tokens*/) {}
};

// Runs one generation on the workers of a plan with blocking gRPC calls:
//   combined:       Generate (server stream)
//   disaggregated:  D.ReserveKv -> P.Prefill (first token) -> D.Generate (the rest)
// Worker failures that mean the worker is gone (UNAVAILABLE, or its calls dropped) mark it down.
class Dispatcher {
 public:
  struct Options {
    const RouterMetrics* metrics = nullptr;  // optional
    // How long decode keeps blocks reserved for a prefill that never commits.
    int kv_reservation_lease_ms = 30000;
    std::chrono::milliseconds cancel_timeout{1000};
  };
  Dispatcher(WorkerRegistry* registry, Options options);

  // Errors: the worker's own status (RESOURCE_EXHAUSTED, INVALID_ARGUMENT, ...), UNAVAILABLE when
  // a worker failed or went down, DEADLINE_EXCEEDED past request.deadline, and the canceller's
  // reason once it is cancelled (the workers are then sent Cancel(request_id)).
  absl::StatusOr<GenerationOutcome> Run(const GenerationRequest& request, WorkerPlan& plan,
                                        CallCanceller* canceller, TokenSink* sink);

 private:
  struct StreamState;
  absl::StatusOr<GenerationOutcome> RunCombined(const GenerationRequest& request,
                                                const WorkerEntry& worker,
                                                CallCanceller* canceller, StreamState* state);
  absl::StatusOr<GenerationOutcome> RunDisaggregated(const GenerationRequest& request,
                                                     const WorkerEntry& prefill,
                                                     const WorkerEntry& decode,
                                                     CallCanceller* canceller, StreamState* state);
  absl::StatusOr<GenerationOutcome> StreamGenerate(const WorkerEntry& worker,
                                                   const v1::GenerateRequest& call,
                                                   const GenerationRequest& request,
                                                   CallCanceller* canceller, StreamState* state);
  // Turns a failed call into the request's error, marking the worker down when it is gone.
  absl::Status CallFailed(const WorkerEntry& worker, const char* call, const grpc::Status& status,
                          CallCanceller* canceller, const GenerationRequest& request);
  void SendCancel(const WorkerEntry& worker, const std::string& request_id);

  WorkerRegistry* registry_;
  const Options options_;
};

}  // namespace tandem::router
