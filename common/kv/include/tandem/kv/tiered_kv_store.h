#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <mutex>
#include "tandem/kv/clock.h"
#include "tandem/kv/disk_tier.h"
#include "tandem/kv/event_log.h"
#include "tandem/kv/host_tier.h"
#include "tandem/kv/token_bucket.h"
#include "tandem/kv/types.h"

namespace tandem::kv {

struct TieredKvStoreOptions {
  std::uint64_t host_capacity_bytes = 0;  // hard limit: a Put that cannot fit is dropped
  double host_low_watermark = 0.8;        // demotion starts above this fraction of capacity
  // Empty: no disk tier (blocks leaving host memory are gone).
  std::string disk_path;
  std::uint64_t disk_capacity_bytes = 0;
  double disk_low_watermark = 0.8;        // background eviction brings the disk back to this
  DiskCompression disk_compression = DiskCompression::kLz4IfItPays;
  // Demotion pacing (disk writes): sustained rate and the most granted at once.
  std::uint64_t demotion_rate_bytes_per_s = 256ull << 20;
  std::uint64_t demotion_burst_bytes = 16ull << 20;
  TtlPolicy ttl;
  std::int64_t ttl_sweep_interval_ms = 60'000;
  // Disk writes skip RocksDB's WAL; Step flushes them this often (clock time) so that blocks
  // demoted longer ago survive a crash (kill -9). 0: only a clean shutdown flushes.
  std::int64_t disk_sync_interval_ms = 1000;
  std::size_t event_log_capacity = 1 << 16;
  // nullptr: the system clock. Must outlive the store.
  const Clock* clock = nullptr;
  // Background maintenance (Step) every background_interval_ms of real time. Off: the owner
  // calls Step() (tests, trace replays with a fake clock).
  bool background_thread = true;
  std::int64_t background_interval_ms = 10;
  int fetch_threads = 2;  // disk reads for Fetch
};

enum class PutOutcome : std::uint8_t {
  kStored,
  kDroppedFull,  // host tier at its hard limit with nothing cheap to drop: recompute later
};

// Longest available prefix of a chain, by tier. Blocks [0, host_prefix) are all in host memory;
// blocks [0, available_prefix) are each in host memory or on disk.
struct LookupResult {
  std::size_t host_prefix = 0;
  std::size_t available_prefix = 0;
  std::vector<KvTier> tiers;  // tier serving each block of the available prefix
};

struct FetchResult {
  // Blocks [0, blocks_ready) were copied into their buffers. A block that vanished, expired or
  // failed its checksum meanwhile ends the prefix; the caller recomputes from there.
  std::size_t blocks_ready = 0;
  absl::Status status;  // not OK only for bad requests or shutdown; misses are not errors
};
using FetchCallback = std::function<void(FetchResult)>;

struct TierStats {
  // Per block asked by Lookup: host hits are blocks served from host memory, disk hits blocks
  // only on disk; misses are blocks this tier could not serve.
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t blocks = 0;
  std::uint64_t bytes = 0;
  std::uint64_t evictions = 0;    // dropped for capacity, gone from this tier
  std::uint64_t demotions = 0;    // moved to the tier below
  std::uint64_t expirations = 0;
  std::uint64_t dropped_puts = 0;
  std::uint64_t corruptions = 0;
  std::uint64_t promotions = 0;   // blocks read up from this tier by Fetch
  std::uint64_t promotion_latency_us_sum = 0;
  std::uint64_t promotion_latency_us_max = 0;
};

struct StoreStats {
  TierStats host;
  TierStats disk;
};

// Consistent view for a consumer that lost events: apply events with seq > `seq` on top.
struct StoreSnapshot {
  std::uint64_t incarnation = 0;
  std::uint64_t seq = 0;
  std::vector<BlockRecord> host;
  std::vector<BlockRecord> disk;
};

// The KV tiers below the device cache: host memory, then RocksDB on disk.
//
// The engine Puts a block when the device evicts it, Lookups a request's chain to learn how much
// prefix it can skip, and Fetches that prefix into device-bound buffers. Failures degrade to
// recompute: a full tier drops the Put, a bad entry is a miss. Blocks above the host low
// watermark are demoted to disk in the background, paced by a token bucket. Every change in
// every tier is published, in order, to the event log (router sync). Thread-safe.
class TieredKvStore {
 public:
  static absl::StatusOr<std::unique_ptr<TieredKvStore>> Open(const TieredKvStoreOptions& options);
  ~TieredKvStore();
  TieredKvStore(const TieredKvStore&) = delete;
  TieredKvStore& operator=(const TieredKvStore&) = delete;

  // Copies `bytes` into host memory. InvalidArgument for an empty block or unknown class;
  // AlreadyExists when the block is already in host memory (nothing changes).
  absl::StatusOr<PutOutcome> Put(TrafficClass cls, std::uint64_t hash, std::uint64_t parent_hash,
                                 std::span<const std::uint8_t> bytes);

  absl::StatusOr<LookupResult> Lookup(TrafficClass cls, std::span<const std::uint64_t> chain);

  // Copies hashes[i] into buffers[i] (each exactly the block's size), host blocks immediately
  // and disk blocks on the fetch threads, then calls `done` once (on a store thread or, when
  // nothing needs a disk read, on the caller's). Buffers must outlive the callback. Disk blocks
  // are promoted into host memory after `done`, so the request never waits for promotion.
  void Fetch(TrafficClass cls, std::span<const std::uint64_t> hashes,
             std::span<const std::span<std::uint8_t>> buffers, FetchCallback done);
  std::future<FetchResult> Fetch(TrafficClass cls, std::span<const std::uint64_t> hashes,
                                 std::span<const std::span<std::uint8_t>> buffers);

  // Marks blocks recently used (eviction order). Does not extend their TTL: retention counts
  // from when the block was computed.
  absl::Status Touch(TrafficClass cls, std::span<const std::uint64_t> hashes);

  // One round of maintenance at the clock's current time: TTL sweep (every
  // ttl_sweep_interval_ms), paced demotion, disk watermark eviction.
  absl::Status Step();

  const EventLog& events() const { return events_; }
  std::uint64_t incarnation() const { return incarnation_; }
  StoreSnapshot Snapshot() const;
  StoreStats Stats() const;

 private:
  struct FetchJob;

  explicit TieredKvStore(const TieredKvStoreOptions& options, const Clock* clock);
  absl::Status Demote(std::int64_t now_ms);
  void SweepHostExpired(std::int64_t now_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseHost(const BlockKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool InHost(const BlockKey& key, std::int64_t now_ms) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RunFetchJob(FetchJob& job);
  void Promote(const BlockKey& key, std::span<const std::uint8_t> bytes);
  void FetchLoop();
  void BackgroundLoop();

  const TieredKvStoreOptions options_;
  const Clock* clock_;
  std::unique_ptr<SystemClock> owned_clock_;
  std::uint64_t incarnation_ = 0;
  EventLog events_;
  std::unique_ptr<DiskTier> disk_;  // null without a disk tier

  mutable std::mutex mu_;
  HostTier host_ ABSL_GUARDED_BY(mu_);
  TokenBucket demotion_bucket_ ABSL_GUARDED_BY(mu_);
  TierStats host_stats_ ABSL_GUARDED_BY(mu_);
  TierStats disk_fetch_stats_ ABSL_GUARDED_BY(mu_);  // lookup hits/misses, promotions
  std::int64_t last_ttl_sweep_ms_ ABSL_GUARDED_BY(mu_) = 0;
  // Step-only (under step_mu_): demotions written since the last disk sync, and when that was.
  bool disk_dirty_ = false;
  std::int64_t last_disk_sync_ms_ = 0;
  std::mutex step_mu_;  // one Step at a time (background thread and explicit calls)

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;       // fetch threads
  std::condition_variable background_cv_;  // maintenance thread (separate: no stolen wakeups)
  std::deque<std::shared_ptr<FetchJob>> fetch_queue_;
  bool stopping_ = false;
  std::vector<std::thread> fetch_threads_;
  std::thread background_thread_;
};

}  // namespace tandem::kv
