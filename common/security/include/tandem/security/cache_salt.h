#pragma once

#include <cstdint>

#include "absl/strings/string_view.h"

namespace tandem::security {

// The parent hash a salted request's KV block chain starts from (SamplingParams.kv_hash_root):
// never 0 (the unsalted root), and different salts give unrelated chains, so blocks are shared
// only by requests with the same salt. Stable across processes and machines, like the block
// hashes themselves. Not a secret: the isolation comes from the salt being chosen by the router
// (the tenant) or by the client (an explicit cache_salt), not from hiding the root.
std::uint64_t CacheSaltRoot(absl::string_view salt);

// The salt of one request: its tenant when tenants are isolated (`per_tenant`), combined with an
// explicit `cache_salt` when the request names one; "" (unsalted) when neither applies. A
// client's cache_salt never reaches another tenant's chains: it is always combined with its own
// tenant when tenants are isolated.
std::uint64_t RequestKvHashRoot(bool per_tenant, absl::string_view tenant,
                                absl::string_view cache_salt);

}  // namespace tandem::security
