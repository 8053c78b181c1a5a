#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::security {

// Admission limits of one API key or one tenant; 0 means unlimited.
struct Limits {
  std::int64_t requests_per_minute = 0;
  std::int64_t tokens_per_minute = 0;   // prompt + max completion, reserved at admission
  std::int64_t concurrent_streams = 0;  // generations in progress at once (streamed or not)
  bool operator==(const Limits&) const = default;
};

// One API key as the router knows it: never the key itself, only its SHA-256.
struct ApiKey {
  std::string key_id;  // "key-" + the first 12 hex digits of the hash: safe in logs
  std::string tenant;
  std::string traffic_class;  // chat, agent; empty: the workers' default
  Limits limits;
};

// The parsed --api-keys-file. One JSON object per line (blank lines and lines starting with '#'
// are skipped):
//   {"key_sha256": "<64 hex>", "tenant": "acme", "traffic_class": "chat", "limits":
//    {"requests_per_minute": 600, "tokens_per_minute": 200000, "concurrent_streams": 16}}
//   {"tenant": "acme", "limits": {...}}   (no key: limits the tenant's keys share)
// Tenant names are 1-64 of [A-Za-z0-9._-] (they are metric labels). Errors name the line, never
// its content, so a key pasted by mistake in place of its hash does not reach a log.
class ApiKeySet {
 public:
  static absl::StatusOr<ApiKeySet> Parse(absl::string_view text);
  static absl::StatusOr<ApiKeySet> Load(const std::string& path);

  // The entry of the presented key, or null. The key is hashed first and the stored hash is
  // compared in constant time; the lookup itself compares hashes only (which an attacker can
  // compute for a guess anyway), so timing reveals nothing about any stored key.
  const ApiKey* Find(absl::string_view presented_key) const;
  // Limits configured for a tenant as a whole (default: none).
  Limits TenantLimits(absl::string_view tenant) const;
  // Every tenant named by a key or a tenant line, sorted.
  std::vector<std::string> Tenants() const;
  std::size_t size() const { return keys_.size(); }

  // The file line for a key (what tools/apikey prints).
  static std::string FileLine(absl::string_view key, const ApiKey& entry);

 private:
  struct Stored {
    std::string digest;  // 32 raw bytes
    ApiKey key;
  };
  absl::flat_hash_map<std::string, Stored> keys_;  // by raw digest
  absl::flat_hash_map<std::string, Limits> tenant_limits_;
};

bool ValidTenantName(absl::string_view tenant);

}  // namespace tandem::security
