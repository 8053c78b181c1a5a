#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::kv {

// Traffic classes keep separate namespaces (disk key prefix) and retention (TTL).
enum class TrafficClass : std::uint8_t { kChat = 0, kAgent = 1 };
inline constexpr int kNumTrafficClasses = 2;

absl::StatusOr<TrafficClass> ParseTrafficClass(absl::string_view name);
absl::string_view TrafficClassName(TrafficClass cls);
// Rejects values that are not a declared enumerator (e.g. a cast from an untrusted integer).
absl::Status ValidateTrafficClass(TrafficClass cls);

// Where a block's bytes live. kDevice belongs to the engine's BlockManager; this library owns the
// tiers below it.
enum class KvTier : std::uint8_t { kDevice = 0, kHost = 1, kDisk = 2 };
absl::string_view KvTierName(KvTier tier);

// A block is named by its engine chained hash within a traffic class.
struct BlockKey {
  TrafficClass cls = TrafficClass::kChat;
  std::uint64_t hash = 0;

  friend bool operator==(const BlockKey&, const BlockKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const BlockKey& key) {
    return H::combine(std::move(h), static_cast<std::uint8_t>(key.cls), key.hash);
  }
};

// What a tier holds about one block, as listed by snapshots (warm-restart re-announcement).
struct BlockRecord {
  BlockKey key;
  std::uint64_t parent_hash = 0;
  std::uint64_t size_bytes = 0;  // uncompressed block bytes
  std::int64_t expiry_unix_ms = 0;
};

// Retention per traffic class; a block is never served after put time + ttl.
struct TtlPolicy {
  std::array<std::int64_t, kNumTrafficClasses> ttl_ms = {
      7LL * 24 * 3600 * 1000,  // chat
      3LL * 24 * 3600 * 1000,  // agent
  };
  std::int64_t For(TrafficClass cls) const { return ttl_ms[static_cast<int>(cls)]; }
};

}  // namespace tandem::kv
