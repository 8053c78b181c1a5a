#include "api/http/auth.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "api/http/json_text.h"

namespace tandem::router {
namespace {

constexpr std::size_t kMaxKeyBytes = 512;

enum class Problem { kNone, kMissing, kMalformed };

// A key is visible ASCII without spaces; anything else was never issued.
bool WellFormed(absl::string_view key) {
  return !key.empty() && key.size() <= kMaxKeyBytes &&
         std::all_of(key.begin(), key.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

Problem Presented(const http::Request& request, absl::string_view* key) {
  auto auth = request.FindHeader("Authorization");
  auto x_api_key = request.FindHeader("x-api-key");
  if (auth.has_value()) {
    absl::string_view value = absl::StripAsciiWhitespace(*auth);
    if (value.size() > 7 && absl::StartsWithIgnoreCase(value, "Bearer ")) {
      *key = absl::StripLeadingAsciiWhitespace(value.substr(7));
      return WellFormed(*key) ? Problem::kNone : Problem::kMalformed;
    }
    // Another scheme (Basic, ...) may belong to a proxy in front; x-api-key still counts.
    if (!x_api_key.has_value()) return Problem::kMalformed;
  }
  if (!x_api_key.has_value()) return Problem::kMissing;
  *key = absl::StripAsciiWhitespace(*x_api_key);
  return WellFormed(*key) ? Problem::kNone : Problem::kMalformed;
}

}  // namespace

http::Response UnauthorizedResponse(ApiStyle style, absl::string_view message) {
  nlohmann::json body;
  if (style == ApiStyle::kAnthropic) {
    body = {{"type", "error"},
            {"error", {{"type", "authentication_error"}, {"message", std::string(message)}}}};
  } else {
    body = {{"error",
             {{"message", std::string(message)},
              {"type", "invalid_request_error"},
              {"param", nullptr},
              {"code", "invalid_api_key"}}}};
  }
  http::Response response = http::Response::Json(401, DumpJson(body));
  response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"tandem\"");
  return response;
}

absl::StatusOr<std::unique_ptr<ApiKeyAuth>> ApiKeyAuth::Load(std::string path,
                                                             metrics::Registry* registry) {
  absl::StatusOr<metrics::Family<metrics::Counter>*> failures = registry->AddCounter(
      "tandem_router_auth_failures_total",
      "Requests refused with 401, by reason (missing, malformed, unknown key)", {"reason"});
  if (!failures.ok()) return failures.status();
  absl::StatusOr<metrics::Family<metrics::Counter>*> reloads = registry->AddCounter(
      "tandem_router_api_keys_reloads_total", "Re-reads of --api-keys-file, by result", {"result"});
  if (!reloads.ok()) return reloads.status();
  std::unique_ptr<ApiKeyAuth> auth(
      new ApiKeyAuth(std::move(path), *failures, (*reloads)->WithLabels({"ok"}).value()));
  absl::StatusOr<security::ApiKeySet> keys = security::ApiKeySet::Load(auth->path_);
  if (!keys.ok()) return keys.status();
  auth->keys_ = std::make_shared<const security::ApiKeySet>(std::move(*keys));
  (void)(*reloads)->WithLabels({"error"});  // both series from the start
  return auth;
}

ApiKeyAuth::ApiKeyAuth(std::string path, metrics::Family<metrics::Counter>* failures,
                       metrics::Counter* reloads)
    : path_(std::move(path)), failures_(failures), reloads_(reloads) {
  for (const char* reason : {"missing", "malformed", "unknown"}) {
    (void)failures_->WithLabels({reason});
  }
}

absl::Status ApiKeyAuth::Reload() {
  absl::StatusOr<security::ApiKeySet> keys = security::ApiKeySet::Load(path_);
  if (!keys.ok()) return keys.status();
  auto fresh = std::make_shared<const security::ApiKeySet>(std::move(*keys));
  {
    absl::MutexLock lock(&mu_);
    keys_ = std::move(fresh);
  }
  reloads_->Increment();
  return absl::OkStatus();
}

std::shared_ptr<const security::ApiKeySet> ApiKeyAuth::keys() const {
  absl::MutexLock lock(&mu_);
  return keys_;
}

std::variant<Principal, http::Response> ApiKeyAuth::Authenticate(const http::Request& request,
                                                                 ApiStyle style) const {
  absl::string_view key;
  const Problem problem = Presented(request, &key);
  const bool anthropic = style == ApiStyle::kAnthropic;
  if (problem == Problem::kMissing) {
    (*failures_->WithLabels({"missing"}))->Increment();
    return UnauthorizedResponse(
        style, anthropic ? "x-api-key header is required"
                         : "You didn't provide an API key. Provide it in an Authorization "
                           "header using Bearer auth (Authorization: Bearer YOUR_KEY).");
  }
  if (problem == Problem::kMalformed) {
    (*failures_->WithLabels({"malformed"}))->Increment();
    return UnauthorizedResponse(
        style, anthropic ? "invalid x-api-key"
                         : "Malformed API key: expected Authorization: Bearer YOUR_KEY or "
                           "x-api-key: YOUR_KEY.");
  }
  std::shared_ptr<const security::ApiKeySet> keys = this->keys();
  const security::ApiKey* entry = keys->Find(key);
  if (entry == nullptr) {
    (*failures_->WithLabels({"unknown"}))->Increment();
    return UnauthorizedResponse(style,
                                anthropic ? "invalid x-api-key" : "Incorrect API key provided.");
  }
  return Principal{.key_id = entry->key_id,
                   .tenant = entry->tenant,
                   .traffic_class = entry->traffic_class,
                   .key_limits = entry->limits};
}

}  // namespace tandem::router
