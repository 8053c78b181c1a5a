#pragma once

#include <chrono>
#include <cstdint>
#include <random>
#include <string>

#include "absl/synchronization/mutex.h"
#include "admission/admission.h"
#include "admission/tenant_limits.h"
#include "api/endpoints/openai_request.h"
#include "api/http/auth.h"
#include "api/http/traffic_class.h"
#include "async/task_group.h"
#include "dispatch/run_admitted.h"
#include "router_metrics.h"
#include "tandem/http/router.h"
#include "tandem/tokenizer/tokenizer.h"
#include "workers/worker_selector.h"

namespace tandem::router {

// How the served model's tokenizer is used: which ids end a generation.
struct TokenizerSetup {
  const tokenizer::Tokenizer* tokenizer = nullptr;
  // llama2.c models end a story by emitting BOS and never stop on EOS (as run.c does).
  bool llama2c_conventions = false;
};

// POST /v1/completions: validation, tokenisation, admission, worker selection, then a
// RequestJob (a coroutine on the router's executor). The conversation endpoints are ProtocolApi's.
class GenerationApi {
 public:
  struct Options {
    std::string served_model;
    std::chrono::milliseconds request_timeout{600000};
    bool isolate_tenant_cache = false;  // each tenant's prompts salt their own KV chains
  };
  struct Deps {
    TokenizerSetup tokenizer;
    RunDeps run;  // where an admitted generation runs; its selector also validates the context
    Admission* admission = nullptr;  // shared with the conversation endpoints: one queue
    const RouterMetrics* metrics = nullptr;
    async::TaskGroup* jobs = nullptr;            // where admitted generations run
    const TrafficClassifier* traffic = nullptr;  // null: every request gets the workers' default
    TenantLimits* limits = nullptr;              // per-key and per-tenant limits; null: none
  };
  GenerationApi(Options options, Deps deps);

  // `principal`: the authenticated caller (--api-keys-file); null when the router has no keys.
  http::HandlerResult Handle(const http::Request& request, const Principal* principal = nullptr);

 private:
  http::Response Fail(const std::string& endpoint, const ApiError& error) const;
  std::optional<ApiError> PromptIds(const OpenAiRequest& request,
                                    std::vector<std::int32_t>* ids) const;
  v1::SamplingParams Sampling(const OpenAiRequest& request, int max_tokens) const;
  // The completion budget: requested or defaulted, and within the workers' context.
  std::optional<ApiError> MaxTokens(const OpenAiRequest& request, std::int64_t prompt_len,
                                    std::int64_t max_context, std::int64_t* max_tokens) const;
  std::string NewRequestId();

  const Options options_;
  const Deps deps_;
  absl::Mutex id_mu_;
  std::mt19937_64 id_rng_ ABSL_GUARDED_BY(id_mu_);
};

}  // namespace tandem::router
