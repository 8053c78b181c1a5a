#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <mutex>
#include "tandem/kv/clock.h"
#include "tandem/kv/event_log.h"
#include "tandem/kv/types.h"

namespace rocksdb {
class DB;
}

namespace tandem::kv {

enum class DiskCompression : std::uint8_t {
  kNone,
  // LZ4 per block, kept only when it saves at least 1/8 of the bytes. Float KV rarely
  // compresses that well (random low mantissa bits), so most blocks are stored raw and pay only
  // the trial compression; see tests/perf/kv_trace_bench.cc for the measured ratio.
  kLz4IfItPays,
};

struct DiskTierOptions {
  std::string path;  // RocksDB directory; created if missing, reopened (warm) if present
  std::uint64_t capacity_bytes = 0;  // stored value bytes (header + payload), not file sizes
  DiskCompression compression = DiskCompression::kLz4IfItPays;
};

struct DiskTierStats {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t blocks = 0;
  std::uint64_t bytes = 0;          // stored value bytes currently held
  std::uint64_t evictions = 0;      // removed for capacity
  std::uint64_t expirations = 0;    // removed because the TTL passed
  std::uint64_t corruptions = 0;    // checksum or format failures (served as misses)
  std::uint64_t bytes_written = 0;  // uncompressed block bytes accepted
  std::uint64_t bytes_read = 0;     // uncompressed block bytes served
  std::uint64_t compressed_blocks = 0;
};

// Blocks persisted in RocksDB, one entry per block:
//   key   = traffic class (1 byte) + chained hash (8 bytes, big-endian: one class is one
//           contiguous, hash-ordered key range)
//   value = 40-byte little-endian header + payload (see src/disk_value.h).
// The checksum covers key, header and payload, so a flipped bit or a value stored under the
// wrong key reads as a miss and the entry is deleted; wrong bytes are never served.
// An in-memory index (rebuilt from the headers on open) answers Contains without I/O and orders
// eviction: least recently used, and after a restart oldest written first.
// Thread-safe. Mutations publish kStored/kRemoved events for KvTier::kDisk to `events`.
class DiskTier {
 public:
  static absl::StatusOr<std::unique_ptr<DiskTier>> Open(const DiskTierOptions& options,
                                                         const Clock* clock, EventLog* events);
  ~DiskTier();
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  // Stores a block, evicting least recently used blocks to stay within capacity. AlreadyExists
  // if the key is held (nothing changes); ResourceExhausted if the block alone exceeds capacity.
  absl::Status Put(const BlockKey& key, std::uint64_t parent_hash, std::int64_t expiry_unix_ms,
                   std::span<const std::uint8_t> bytes);

  // Copies the block into `out`, which must have exactly the block's size. NotFound on a miss,
  // including expired and corrupt entries (both are deleted). InvalidArgument on a size mismatch.
  absl::Status Read(const BlockKey& key, std::span<std::uint8_t> out);
  absl::StatusOr<std::vector<std::uint8_t>> Get(const BlockKey& key);

  // Index-only queries (no I/O). An expired block counts as absent.
  bool Contains(const BlockKey& key) const;
  absl::StatusOr<BlockRecord> Describe(const BlockKey& key) const;
  void Touch(const BlockKey& key);

  absl::Status Remove(const BlockKey& key);
  // Deletes every expired block; returns how many.
  absl::StatusOr<std::size_t> SweepExpired();
  // Evicts least recently used blocks until at most `target_bytes` are held.
  absl::Status EvictDownTo(std::uint64_t target_bytes);

  std::vector<BlockRecord> Snapshot() const;
  // Callers that need the snapshot to agree with the event log hold events->mutex() too.
  std::vector<BlockRecord> SnapshotLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::mutex& mutex() const ABSL_LOCK_RETURNED(mu_) { return mu_; }

  DiskTierStats stats() const;
  std::uint64_t capacity_bytes() const { return options_.capacity_bytes; }
  std::uint64_t used_bytes() const;
  // Forces memtables and the WAL to storage (benchmarks compare against fdatasync).
  absl::Status Sync();

 private:
  struct IndexEntry {
    std::uint64_t parent_hash = 0;
    std::uint64_t size_bytes = 0;    // uncompressed
    std::uint64_t stored_bytes = 0;  // header + payload
    std::int64_t expiry_unix_ms = 0;
    std::list<BlockKey>::iterator lru_pos;
  };

  DiskTier(const DiskTierOptions& options, const Clock* clock, EventLog* events,
           std::unique_ptr<rocksdb::DB> db);
  absl::Status LoadIndex();
  void IndexInsertLocked(const BlockKey& key, IndexEntry entry, bool most_recent)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // By value: callers pass lru_.front(), which this erases.
  absl::Status RemoveLocked(BlockKey key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Called when a read found the entry unusable: deletes it only if it is still the same
  // unusable entry (a concurrent rewrite wins).
  void DropUnusable(const BlockKey& key, bool missing);

  const DiskTierOptions options_;
  const Clock* clock_;
  EventLog* events_;
  std::unique_ptr<rocksdb::DB> db_;

  mutable std::mutex mu_;
  absl::flat_hash_map<BlockKey, IndexEntry> index_ ABSL_GUARDED_BY(mu_);
  std::list<BlockKey> lru_ ABSL_GUARDED_BY(mu_);  // front = next to evict
  std::uint64_t used_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  DiskTierStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::kv
