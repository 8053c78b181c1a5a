#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tandem/http/message.h"
#include "tandem/metrics/registry.h"
#include "tandem/security/api_keys.h"

namespace tandem::router {

// Per-key and per-tenant admission limits (--api-keys-file): requests per minute, tokens per
// minute and concurrent streams. A minute limit is a token bucket that holds a minute's worth and
// refills continuously (as OpenAI's and Anthropic's limits behave): a burst may spend it at once,
// then requests pass at the limit's rate. Tokens are prompt + max completion, reserved at
// admission and settled to what the generation used when it ends. Every check is made before the
// request is queued, so a refusal (429 + Retry-After + the rate-limit headers) precedes any byte
// of a stream. Metrics are labelled by tenant, never by key.
class TenantLimits {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  struct Options {
    Clock now;  // empty: steady_clock
    metrics::Registry* registry = nullptr;
  };
  static absl::StatusOr<std::unique_ptr<TenantLimits>> Create(Options options);
  ~TenantLimits();

  // The tenants and their limits from a (re)loaded key set. Usage so far is kept; a tenant that
  // is gone keeps its usage until its last lease ends but loses its limit series.
  void Configure(const security::ApiKeySet& keys);

  // What the headers report: the tighter of key and tenant per dimension (limit 0: none).
  struct Snapshot {
    std::int64_t requests_limit = 0, requests_remaining = 0;
    double requests_reset_s = 0;  // until the bucket is full again
    std::int64_t tokens_limit = 0, tokens_remaining = 0;
    double tokens_reset_s = 0;
    double retry_after_s = 0;  // refusals only
  };

  // A granted request's hold on its limits: one concurrent stream, and its reserved tokens.
  class Lease {
   public:
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    // The generation used `tokens` (prompt + completion): the rest of the reservation returns to
    // the buckets. Once; the destructor settles at 0 used if never called (nothing generated).
    void Settle(std::int64_t used_tokens);

   private:
    friend class TenantLimits;
    struct State;
    Lease(std::shared_ptr<State> state, std::string key_id, std::string tenant,
          std::int64_t reserved);
    std::shared_ptr<State> state_;
    const std::string key_id_;
    const std::string tenant_;
    const std::int64_t reserved_;
    bool settled_ = false;
  };

  struct Grant {
    std::unique_ptr<Lease> lease;  // null: refused
    absl::Status refusal;          // ResourceExhausted, with the Retry-After hint, when refused
    Snapshot snapshot;
  };
  // Admits one request of `tokens` for the key (its own limits) and its tenant (the tenant's).
  Grant Acquire(const std::string& key_id, const security::Limits& key_limits,
                const std::string& tenant, std::int64_t tokens);

  // x-ratelimit-* (OpenAI) or anthropic-ratelimit-* headers for a snapshot; a refusal's carry
  // Retry-After as well (added by the error response).
  static std::vector<http::Header> OpenAiHeaders(const Snapshot& snapshot);
  static std::vector<http::Header> AnthropicHeaders(const Snapshot& snapshot, absl::Time now);

 private:
  explicit TenantLimits(std::shared_ptr<Lease::State> state);
  std::shared_ptr<Lease::State> state_;
};

}  // namespace tandem::router
