#pragma once

#include <memory>
#include <string>
#include <variant>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "tandem/http/message.h"
#include "tandem/metrics/registry.h"
#include "tandem/security/api_keys.h"

namespace tandem::router {

// Who is calling, from the API key's entry in --api-keys-file.
struct Principal {
  std::string key_id;  // safe to log; never the key
  std::string tenant;
  std::string traffic_class;  // empty: the workers' default
  security::Limits key_limits;
};

// Whose error envelope a refusal uses.
enum class ApiStyle { kOpenAi, kAnthropic };

// --api-keys-file: every protected endpoint asks Authenticate first. The key set is swapped whole
// on Reload (SIGHUP), so requests already admitted, streams included, run to their end whatever
// the new file says; the next request sees the new keys.
class ApiKeyAuth {
 public:
  static absl::StatusOr<std::unique_ptr<ApiKeyAuth>> Load(std::string path,
                                                          metrics::Registry* registry);

  // Re-reads the file. On an error the keys in force stay and the error is returned.
  absl::Status Reload();

  // The caller, or the 401 answer in the style's envelope (missing, malformed or unknown key).
  // The key comes from `Authorization: Bearer KEY`, else `x-api-key: KEY`.
  std::variant<Principal, http::Response> Authenticate(const http::Request& request,
                                                       ApiStyle style) const;

  std::shared_ptr<const security::ApiKeySet> keys() const;
  const std::string& path() const { return path_; }

 private:
  ApiKeyAuth(std::string path, metrics::Family<metrics::Counter>* failures,
             metrics::Counter* reloads);

  const std::string path_;
  metrics::Family<metrics::Counter>* failures_;  // {reason}
  metrics::Counter* reloads_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const security::ApiKeySet> keys_ ABSL_GUARDED_BY(mu_);
};

// The 401 answer itself (also what a test compares against).
http::Response UnauthorizedResponse(ApiStyle style, absl::string_view message);

}  // namespace tandem::router
