#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "tandem/kv/types.h"

namespace tandem::kv {

// Block bytes are immutable once stored and shared, so a reader (fetch, demotion) can keep
// using them after the tier dropped the entry.
using BlockBytes = std::shared_ptr<const std::vector<std::uint8_t>>;

// Host-memory blocks, bounded by bytes, in least-recently-used order. Not thread-safe: the
// TieredKvStore serialises access and publishes the events.
class HostTier {
 public:
  struct Entry {
    std::uint64_t parent_hash = 0;
    std::int64_t expiry_unix_ms = 0;
    BlockBytes bytes;
    bool on_disk = false;  // a copy is already on the disk tier: dropping it costs no write
  };

  explicit HostTier(std::uint64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  std::uint64_t capacity_bytes() const { return capacity_bytes_; }
  std::uint64_t used_bytes() const { return used_bytes_; }
  std::size_t num_blocks() const { return index_.size(); }
  bool Fits(std::uint64_t bytes) const { return used_bytes_ + bytes <= capacity_bytes_; }

  // The caller checked absence and capacity.
  void Insert(const BlockKey& key, Entry entry);
  const Entry* Find(const BlockKey& key) const;
  Entry* FindMutable(const BlockKey& key);
  void Touch(const BlockKey& key);  // most recently used
  std::optional<Entry> Erase(const BlockKey& key);

  // Least recently used first.
  std::vector<BlockKey> ColdestFirst(std::size_t max_keys) const;
  std::vector<BlockKey> ExpiredKeys(std::int64_t now_unix_ms) const;
  std::vector<BlockRecord> Snapshot() const;

 private:
  struct Slot {
    Entry entry;
    std::list<BlockKey>::iterator lru_pos;
  };
  std::uint64_t capacity_bytes_;
  std::uint64_t used_bytes_ = 0;
  absl::flat_hash_map<BlockKey, Slot> index_;
  std::list<BlockKey> lru_;  // front = least recently used
};

}  // namespace tandem::kv
