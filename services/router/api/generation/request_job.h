#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "admission/admission.h"
#include "admission/tenant_limits.h"
#include "api/generation/response_format.h"
#include "api/generation/token_latency.h"
#include "api/http/client_channel.h"
#include "async/task.h"
#include "async/task_group.h"
#include "dispatch/call_canceller.h"
#include "dispatch/dispatcher.h"
#include "dispatch/run_admitted.h"
#include "router_metrics.h"
#include "tandem/http/router.h"

namespace tandem::router {

// Everything one admitted, validated generation needs, whichever endpoint took it.
struct JobSetup {
  GenerationRequest generation;
  std::shared_ptr<CallCanceller> canceller;
  std::unique_ptr<AdmissionTicket> ticket;
  std::chrono::steady_clock::time_point arrived;
  RunDeps run;  // where it runs once admitted
  const RouterMetrics* metrics = nullptr;
  std::string endpoint;  // metrics label
  bool stream = false;
  absl::Duration sse_write_timeout = absl::Seconds(30);
  // The caller's hold on its per-key and per-tenant limits (--api-keys-file); null without.
  // Settled with the tokens used when the generation ends, released once the answer is out.
  std::unique_ptr<TenantLimits::Lease> limits;
  std::vector<http::Header> response_headers;  // the rate-limit headers
  // A salted request's selector (its KV chain root), which `run.selector` then points to.
  std::unique_ptr<WorkerSelector> rooted_selector;
};

// Salts `setup`'s KV chain with `kv_hash_root` (0: unsalted, nothing changes): the workers store
// and look up its blocks under that root, and the router's prefix index matches it the same way.
void SaltKvChain(JobSetup* setup, std::uint64_t kv_hash_root);

// The one request path of every generation endpoint: waits for its turn, runs on workers
// (RunAdmitted) and answers through the protocol's ResponseFormat: a whole response, or a stream
// that opens with the first token (so a failure before it keeps its own HTTP status: 429 with
// Retry-After, 503, ...) and, after a failure mid-stream, ends with the protocol's error events.
// A coroutine: it holds no thread while it waits.
class RequestJob final : public TokenSink {
 public:
  RequestJob(JobSetup setup, std::unique_ptr<ResponseFormat> format);

  // The HTTP answer that starts the job in `jobs` once the server hands over the responder.
  static http::HandlerResult Launch(std::shared_ptr<RequestJob> job, async::TaskGroup* jobs);

  bool OnTokens(std::span<const std::int32_t> ids) override;
  void OnPromptCached(std::uint32_t cached_prompt_tokens) override;
  async::Task<bool> Flush() override;

 private:
  // Static, with the job as an argument: tasks start lazily, so only their arguments (copied into
  // the frame at creation) are sure to be alive when they do.
  static async::Task<void> Run(std::shared_ptr<RequestJob> job,
                               std::shared_ptr<http::Responder> responder);
  async::Task<void> Answer(absl::StatusOr<GenerationOutcome> outcome);
  void WriteAll(std::vector<http::SseEvent> events);

  JobSetup setup_;
  std::unique_ptr<ResponseFormat> format_;
  TokenLatency latency_;
  std::unique_ptr<ClientChannel> channel_;
  absl::Status decode_error_;
  std::int64_t generated_tokens_ = 0;  // as delivered, for settling the token limits
};

}  // namespace tandem::router
