#pragma once

#include <chrono>
#include <cstdint>
#include <random>
#include <string>

#include "absl/synchronization/mutex.h"
#include "admission/admission.h"
#include "admission/tenant_limits.h"
#include "api/endpoints/chat_format.h"
#include "api/endpoints/generation_api.h"
#include "api/http/auth.h"
#include "api/http/blocking_pool.h"
#include "api/http/traffic_class.h"
#include "async/task_group.h"
#include "dispatch/run_admitted.h"
#include "router_metrics.h"
#include "tandem/http/router.h"
#include "tandem/image/fetch.h"
#include "tandem/recipe/conversation.h"
#include "tandem/recipe/convert.h"
#include "workers/worker_selector.h"

namespace tandem::tokenizer {
class HfBpeTokenizer;
}

namespace tandem::router {

// POST /v1/chat/completions, /v1/responses, /v1/messages and /v1/messages/count_tokens: the
// request is converted, rendered and encoded as deepseek-recipe does (common/recipe), run on the
// workers, and the output parsed back into the protocol's response or stream events. Every
// rejection uses the protocol's own error envelope.
class ProtocolApi {
 public:
  struct Options {
    std::string served_model;
    ChatFormat format = ChatFormat::kPlain;
    std::chrono::milliseconds request_timeout{600000};
    bool isolate_tenant_cache = false;         // each tenant's prompts salt their own KV chains
    std::vector<std::string> image_url_hosts;  // empty: image URLs are refused
    // Requests that may name image URLs are prepared on this many threads of their own, never
    // on an HTTP I/O thread (a fetch can wait its full time limit); up to 32 per thread wait
    // for one, more are refused with 503.
    int image_fetch_concurrency = 8;
  };
  struct Deps {
    TokenizerSetup tokenizer;
    RunDeps run;  // where an admitted generation runs; its selector also validates the context
    Admission* admission = nullptr;  // shared with /v1/completions: one in-flight bound
    const RouterMetrics* metrics = nullptr;
    async::TaskGroup* jobs = nullptr;            // where admitted generations run
    const TrafficClassifier* traffic = nullptr;  // null: every request gets the workers' default
    TenantLimits* limits = nullptr;              // per-key and per-tenant limits; null: none
  };
  // Fails when a DeepSeek format is asked of a tokenizer that is not a tokenizer.json BPE.
  static absl::StatusOr<std::unique_ptr<ProtocolApi>> Create(Options options, Deps deps);

  // `principal`: the authenticated caller (--api-keys-file); null when the router has no keys.
  http::HandlerResult Handle(recipe::Protocol protocol, const http::Request& request,
                             const Principal* principal = nullptr);
  http::HandlerResult CountTokens(const http::Request& request);

 private:
  ProtocolApi(Options options, Deps deps, const tokenizer::HfBpeTokenizer* bpe);

  struct Prepared {
    recipe::ConversationRequest request;
    std::vector<std::int32_t> prompt;
    std::string cache_salt;  // the body's cache_salt (vLLM's field), taken out before conversion
    // In prompt order; their placeholders in `prompt` are expanded to their rows already.
    std::vector<RequestImage> images;
  };
  // The body as a JSON object, or the error that it is not one.
  static absl::StatusOr<nlohmann::ordered_json> ParseBody(absl::string_view body);
  // Check the model, convert, render, encode. Errors carry the protocol envelope's fields.
  absl::StatusOr<Prepared> Prepare(recipe::Protocol protocol, nlohmann::ordered_json body) const;
  absl::StatusOr<std::vector<std::int32_t>> Encode(const recipe::Conversation& conversation) const;
  http::Response Fail(recipe::Protocol protocol, const std::string& endpoint,
                      const absl::Status& status) const;
  http::HandlerResult HandleNow(recipe::Protocol protocol, const http::Request& request,
                                const Principal* principal);
  http::HandlerResult CountTokensNow(const http::Request& request);
  // `run(request)` itself when the body cannot name an image URL we would fetch; otherwise a
  // deferred answer that runs it on fetch_pool_ (and 503 when that pool's queue is full).
  http::HandlerResult OffIoThreadIfFetching(
      recipe::Protocol protocol, const std::string& endpoint, const http::Request& request,
      std::function<http::HandlerResult(const http::Request&)> run);
  std::string NewResponseId(recipe::Protocol protocol);

  const Options options_;
  const Deps deps_;
  std::unique_ptr<image::ImageFetcher> image_fetcher_;  // null: image URLs are refused
  const tokenizer::HfBpeTokenizer* bpe_;                // DeepSeek formats only
  recipe::ConversionOptions conversion_;
  absl::Mutex id_mu_;
  std::mt19937_64 id_rng_ ABSL_GUARDED_BY(id_mu_);
  // Last: destroyed (its threads joined) before anything its tasks use.
  std::unique_ptr<BlockingPool> fetch_pool_;  // null when image URLs are refused
};

}  // namespace tandem::router
