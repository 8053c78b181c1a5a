#include "admission/tenant_limits.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "admission/admission.h"

namespace tandem::router {
namespace {

using TimePoint = std::chrono::steady_clock::time_point;

// A minute's worth of capacity, refilled continuously.
struct Bucket {
  double level = -1;  // < 0: never used (full)
  TimePoint last{};

  void Refill(std::int64_t capacity, TimePoint now) {
    if (level < 0) {
      level = static_cast<double>(capacity);
    } else if (now > last) {
      const double dt = std::chrono::duration<double>(now - last).count();
      level = std::min(static_cast<double>(capacity), level + capacity * dt / 60.0);
    } else {
      level = std::min(static_cast<double>(capacity), level);
    }
    last = std::max(last, now);
  }
  // Seconds until `n` are available (0: now).
  double WaitFor(double n, std::int64_t capacity) const {
    return level >= n ? 0.0 : (n - level) * 60.0 / static_cast<double>(capacity);
  }
  double ToFull(std::int64_t capacity) const {
    return std::max(0.0, (capacity - level) * 60.0 / static_cast<double>(capacity));
  }
};

struct Usage {
  Bucket requests;
  Bucket tokens;
  std::int64_t active = 0;
  std::int64_t reserved = 0;
};

// Go-style duration as OpenAI writes x-ratelimit-reset-*: "1s", "6m0s", "250ms".
std::string ResetText(double seconds) {
  if (seconds < 1.0) return absl::StrCat(static_cast<std::int64_t>(std::ceil(seconds * 1000)), "ms");
  const auto s = static_cast<std::int64_t>(std::ceil(seconds));
  if (s < 60) return absl::StrCat(s, "s");
  return absl::StrCat(s / 60, "m", s % 60, "s");
}

}  // namespace

struct TenantLimits::Lease::State {
  Clock now;
  absl::Mutex mu;
  absl::flat_hash_map<std::string, Usage> keys ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::string, Usage> tenants ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::string, security::Limits> tenant_limits ABSL_GUARDED_BY(mu);
  // Key limits as last admitted with (a reload may change them; refunds use the current ones).
  absl::flat_hash_map<std::string, security::Limits> key_limits ABSL_GUARDED_BY(mu);

  metrics::Family<metrics::Gauge>* limit = nullptr;         // {tenant, limit}
  metrics::Family<metrics::Counter>* requests = nullptr;     // {tenant}
  metrics::Family<metrics::Counter>* refused = nullptr;      // {tenant, limit, scope}
  metrics::Family<metrics::Counter>* tokens = nullptr;       // {tenant}: settled
  metrics::Family<metrics::Gauge>* reserved = nullptr;       // {tenant}
  metrics::Family<metrics::Gauge>* active = nullptr;         // {tenant}

  void Refund(Usage& usage, std::int64_t capacity, std::int64_t reserved, std::int64_t used,
              TimePoint t) {
    usage.reserved -= reserved;
    if (capacity <= 0) return;
    usage.tokens.Refill(capacity, t);
    usage.tokens.level = std::min(static_cast<double>(capacity),
                                  usage.tokens.level + static_cast<double>(reserved - used));
  }
};

absl::StatusOr<std::unique_ptr<TenantLimits>> TenantLimits::Create(Options options) {
  auto state = std::make_shared<Lease::State>();
  state->now = options.now ? std::move(options.now) : [] { return std::chrono::steady_clock::now(); };
  metrics::Registry* r = options.registry;
  if (r == nullptr) return absl::InvalidArgumentError("TenantLimits needs a metrics registry");
  auto limit = r->AddGauge("tandem_router_tenant_limit",
                           "A tenant's configured limit (requests_per_minute, tokens_per_minute, "
                           "concurrent_streams; 0: none)",
                           {"tenant", "limit"});
  auto requests = r->AddCounter("tandem_router_tenant_requests_total",
                                "Generations a tenant's keys were admitted for", {"tenant"});
  auto refused = r->AddCounter(
      "tandem_router_tenant_rate_limited_total",
      "Requests refused with 429 by a limit, by tenant, limit and scope (key or tenant)",
      {"tenant", "limit", "scope"});
  auto tokens = r->AddCounter("tandem_router_tenant_tokens_total",
                              "Tokens (prompt + completion) a tenant's generations used",
                              {"tenant"});
  auto reserved = r->AddGauge("tandem_router_tenant_tokens_reserved",
                              "Tokens reserved by a tenant's generations in progress", {"tenant"});
  auto active = r->AddGauge("tandem_router_tenant_active_streams",
                            "A tenant's generations in progress", {"tenant"});
  for (const absl::Status& st : {limit.status(), requests.status(), refused.status(),
                                 tokens.status(), reserved.status(), active.status()}) {
    if (!st.ok()) return st;
  }
  state->limit = *limit;
  state->requests = *requests;
  state->refused = *refused;
  state->tokens = *tokens;
  state->reserved = *reserved;
  state->active = *active;
  return std::unique_ptr<TenantLimits>(new TenantLimits(std::move(state)));
}

TenantLimits::TenantLimits(std::shared_ptr<Lease::State> state) : state_(std::move(state)) {}
TenantLimits::~TenantLimits() = default;

void TenantLimits::Configure(const security::ApiKeySet& keys) {
  Lease::State& s = *state_;
  absl::MutexLock lock(&s.mu);
  for (const auto& [tenant, limits] : s.tenant_limits) {
    for (const char* name : {"requests_per_minute", "tokens_per_minute", "concurrent_streams"}) {
      s.limit->Remove({tenant, name});
    }
  }
  s.tenant_limits.clear();
  for (const std::string& tenant : keys.Tenants()) {
    const security::Limits limits = keys.TenantLimits(tenant);
    s.tenant_limits[tenant] = limits;
    (*s.limit->WithLabels({tenant, "requests_per_minute"}))
        ->Set(static_cast<double>(limits.requests_per_minute));
    (*s.limit->WithLabels({tenant, "tokens_per_minute"}))
        ->Set(static_cast<double>(limits.tokens_per_minute));
    (*s.limit->WithLabels({tenant, "concurrent_streams"}))
        ->Set(static_cast<double>(limits.concurrent_streams));
    // Usage series exist from the start, at 0.
    (void)s.requests->WithLabels({tenant});
    (void)s.tokens->WithLabels({tenant});
    (void)s.reserved->WithLabels({tenant});
    (void)s.active->WithLabels({tenant});
  }
}

TenantLimits::Grant TenantLimits::Acquire(const std::string& key_id,
                                          const security::Limits& key_limits,
                                          const std::string& tenant, std::int64_t tokens) {
  Lease::State& s = *state_;
  const TimePoint t = s.now();
  absl::MutexLock lock(&s.mu);
  s.key_limits[key_id] = key_limits;
  const security::Limits tenant_limits = s.tenant_limits.contains(tenant)
                                             ? s.tenant_limits[tenant]
                                             : security::Limits{};
  struct Scope {
    const char* name;
    const security::Limits& limits;
    Usage& usage;
  };
  Scope scopes[2] = {{"key", key_limits, s.keys[key_id]},
                     {"tenant", tenant_limits, s.tenants[tenant]}};
  Grant grant;
  double retry = 0;
  std::string why;
  auto refuse = [&](const Scope& scope, const char* limit, double after, std::string message) {
    (*s.refused->WithLabels({tenant, limit, scope.name}))->Increment();
    if (why.empty() || after > retry) {
      why = std::move(message);
      retry = std::max(retry, after);
    }
  };
  for (Scope& scope : scopes) {
    const security::Limits& l = scope.limits;
    Usage& u = scope.usage;
    if (l.requests_per_minute > 0) u.requests.Refill(l.requests_per_minute, t);
    if (l.tokens_per_minute > 0) u.tokens.Refill(l.tokens_per_minute, t);
    if (l.concurrent_streams > 0 && u.active >= l.concurrent_streams) {
      refuse(scope, "concurrent_streams", 1.0,
             absl::StrCat("Rate limit reached: ", l.concurrent_streams, " concurrent requests per ",
                          scope.name, "; retry when one ends."));
    }
    if (l.requests_per_minute > 0 && u.requests.level < 1.0) {
      refuse(scope, "requests_per_minute", u.requests.WaitFor(1.0, l.requests_per_minute),
             absl::StrCat("Rate limit reached: ", l.requests_per_minute,
                          " requests per minute per ", scope.name, "."));
    }
    if (l.tokens_per_minute > 0 && tokens > l.tokens_per_minute) {
      refuse(scope, "tokens_per_minute", 60.0,
             absl::StrCat("Request too large: it needs ", tokens,
                          " tokens (prompt + max completion), more than the limit of ",
                          l.tokens_per_minute, " tokens per minute per ", scope.name,
                          ". Lower max_tokens or shorten the prompt."));
    } else if (l.tokens_per_minute > 0 && u.tokens.level < static_cast<double>(tokens)) {
      refuse(scope, "tokens_per_minute",
             u.tokens.WaitFor(static_cast<double>(tokens), l.tokens_per_minute),
             absl::StrCat("Rate limit reached: ", l.tokens_per_minute, " tokens per minute per ",
                          scope.name, "; this request needs ", tokens, "."));
    }
  }
  if (why.empty()) {
    for (Scope& scope : scopes) {
      if (scope.limits.requests_per_minute > 0) scope.usage.requests.level -= 1.0;
      if (scope.limits.tokens_per_minute > 0) {
        scope.usage.tokens.level -= static_cast<double>(tokens);
      }
      scope.usage.active += 1;
      scope.usage.reserved += tokens;
    }
    (*s.requests->WithLabels({tenant}))->Increment();
    (*s.active->WithLabels({tenant}))->Increment();
    (*s.reserved->WithLabels({tenant}))->Add(static_cast<double>(tokens));
    grant.lease.reset(new Lease(state_, key_id, tenant, tokens));
  } else {
    grant.refusal = absl::ResourceExhaustedError(why);
    SetRetryAfter(&grant.refusal,
                  std::chrono::seconds(std::max<std::int64_t>(
                      1, static_cast<std::int64_t>(std::ceil(retry)))));
    grant.snapshot.retry_after_s = retry;
  }
  // The headers: per dimension, whichever scope has less left.
  Snapshot& snap = grant.snapshot;
  for (Scope& scope : scopes) {
    const security::Limits& l = scope.limits;
    if (l.requests_per_minute > 0) {
      const auto remaining = static_cast<std::int64_t>(std::max(0.0, std::floor(scope.usage.requests.level)));
      if (snap.requests_limit == 0 || remaining < snap.requests_remaining) {
        snap.requests_limit = l.requests_per_minute;
        snap.requests_remaining = remaining;
        snap.requests_reset_s = scope.usage.requests.ToFull(l.requests_per_minute);
      }
    }
    if (l.tokens_per_minute > 0) {
      const auto remaining = static_cast<std::int64_t>(std::max(0.0, std::floor(scope.usage.tokens.level)));
      if (snap.tokens_limit == 0 || remaining < snap.tokens_remaining) {
        snap.tokens_limit = l.tokens_per_minute;
        snap.tokens_remaining = remaining;
        snap.tokens_reset_s = scope.usage.tokens.ToFull(l.tokens_per_minute);
      }
    }
  }
  return grant;
}

TenantLimits::Lease::Lease(std::shared_ptr<State> state, std::string key_id, std::string tenant,
                           std::int64_t reserved)
    : state_(std::move(state)), key_id_(std::move(key_id)), tenant_(std::move(tenant)),
      reserved_(reserved) {}

void TenantLimits::Lease::Settle(std::int64_t used_tokens) {
  if (settled_) return;
  settled_ = true;
  State& s = *state_;
  const TimePoint t = s.now();
  absl::MutexLock lock(&s.mu);
  const std::int64_t used = std::max<std::int64_t>(0, used_tokens);
  s.Refund(s.keys[key_id_], s.key_limits[key_id_].tokens_per_minute, reserved_, used, t);
  const std::int64_t tenant_tpm =
      s.tenant_limits.contains(tenant_) ? s.tenant_limits[tenant_].tokens_per_minute : 0;
  s.Refund(s.tenants[tenant_], tenant_tpm, reserved_, used, t);
  (*s.tokens->WithLabels({tenant_}))->Increment(static_cast<double>(used));
  (*s.reserved->WithLabels({tenant_}))->Add(-static_cast<double>(reserved_));
}

TenantLimits::Lease::~Lease() {
  Settle(0);
  State& s = *state_;
  absl::MutexLock lock(&s.mu);
  s.keys[key_id_].active -= 1;
  s.tenants[tenant_].active -= 1;
  (*s.active->WithLabels({tenant_}))->Decrement();
}

namespace {

// One dimension's three headers; `names`: limit, remaining, reset header names.
void AddDimension(std::vector<http::Header>* h, const char* const (&names)[3], std::int64_t limit,
                  std::int64_t remaining, std::string reset) {
  if (limit <= 0) return;
  h->emplace_back(names[0], absl::StrCat(limit));
  h->emplace_back(names[1], absl::StrCat(remaining));
  h->emplace_back(names[2], std::move(reset));
}

}  // namespace

std::vector<http::Header> TenantLimits::OpenAiHeaders(const Snapshot& snap) {
  static constexpr const char* kRequests[3] = {"x-ratelimit-limit-requests",
                                               "x-ratelimit-remaining-requests",
                                               "x-ratelimit-reset-requests"};
  static constexpr const char* kTokens[3] = {"x-ratelimit-limit-tokens",
                                             "x-ratelimit-remaining-tokens",
                                             "x-ratelimit-reset-tokens"};
  std::vector<http::Header> h;
  AddDimension(&h, kRequests, snap.requests_limit, snap.requests_remaining,
               ResetText(snap.requests_reset_s));
  AddDimension(&h, kTokens, snap.tokens_limit, snap.tokens_remaining,
               ResetText(snap.tokens_reset_s));
  return h;
}

std::vector<http::Header> TenantLimits::AnthropicHeaders(const Snapshot& snap, absl::Time now) {
  static constexpr const char* kRequests[3] = {"anthropic-ratelimit-requests-limit",
                                               "anthropic-ratelimit-requests-remaining",
                                               "anthropic-ratelimit-requests-reset"};
  static constexpr const char* kTokens[3] = {"anthropic-ratelimit-tokens-limit",
                                             "anthropic-ratelimit-tokens-remaining",
                                             "anthropic-ratelimit-tokens-reset"};
  // RFC 3339: when the bucket is full again.
  auto at = [now](double seconds) {
    return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", now + absl::Seconds(std::ceil(seconds)),
                            absl::UTCTimeZone());
  };
  std::vector<http::Header> h;
  AddDimension(&h, kRequests, snap.requests_limit, snap.requests_remaining,
               at(snap.requests_reset_s));
  AddDimension(&h, kTokens, snap.tokens_limit, snap.tokens_remaining, at(snap.tokens_reset_s));
  return h;
}

}  // namespace tandem::router
