#include "tandem/kv/tiered_kv_store.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tandem/base/status_macros.h"

namespace tandem::kv {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Blocks whose bytes the disk format can describe (u32 length).
constexpr std::uint64_t kMaxBlockBytes = 0xFFFFFFFFull;
// Put at the hard limit looks this far into the cold end for clean copies it may drop for free.
constexpr std::size_t kMaxCleanScan = 64;

absl::Status ValidateWatermark(double value, absl::string_view name) {
  if (!(value > 0.0 && value <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(name, " must be in (0, 1], got ", value));
  }
  return absl::OkStatus();
}

std::uint64_t Fraction(std::uint64_t capacity, double fraction) {
  return static_cast<std::uint64_t>(static_cast<double>(capacity) * fraction);
}

}  // namespace

// One Fetch's disk part, shared by the fetch threads that work on it: each claims the next
// unread block in chain order (the prefix the request needs comes first), and whichever finishes
// last reports and promotes.
struct TieredKvStore::FetchJob {
  TrafficClass cls = TrafficClass::kChat;
  std::vector<std::uint64_t> hashes;
  std::vector<std::span<std::uint8_t>> buffers;
  FetchCallback done;
  std::size_t ready = 0;  // leading blocks copied before the job was queued
  SteadyClock::time_point started;

  std::atomic<std::size_t> next{0};               // next block to claim
  std::atomic<std::size_t> first_failed{SIZE_MAX};  // no point reading past a miss
  std::atomic<int> workers_left{0};
  std::vector<std::uint8_t> ok;                   // per block, written by its claimer
  std::vector<std::vector<std::uint8_t>> promote; // disk blocks' bytes, for promotion
  std::mutex status_mu;
  absl::Status status;
};

TieredKvStore::TieredKvStore(const TieredKvStoreOptions& options, const Clock* clock)
    : options_(options),
      clock_(clock),
      events_(options.event_log_capacity),
      host_(options.host_capacity_bytes),
      demotion_bucket_(options.demotion_rate_bytes_per_s, options.demotion_burst_bytes,
                       clock->NowUnixMs()) {
  last_ttl_sweep_ms_ = clock->NowUnixMs();
  incarnation_ = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
}

absl::StatusOr<std::unique_ptr<TieredKvStore>> TieredKvStore::Open(
    const TieredKvStoreOptions& options) {
  if (options.host_capacity_bytes == 0) {
    return absl::InvalidArgumentError("host_capacity_bytes must be > 0");
  }
  TANDEM_RETURN_IF_ERROR(ValidateWatermark(options.host_low_watermark, "host_low_watermark"));
  TANDEM_RETURN_IF_ERROR(ValidateWatermark(options.disk_low_watermark, "disk_low_watermark"));
  if (options.demotion_rate_bytes_per_s == 0 || options.demotion_burst_bytes == 0) {
    return absl::InvalidArgumentError("demotion rate and burst must be > 0");
  }
  if (options.disk_sync_interval_ms < 0) {
    return absl::InvalidArgumentError("disk_sync_interval_ms must be >= 0");
  }
  if (options.fetch_threads < 1) return absl::InvalidArgumentError("fetch_threads must be >= 1");
  for (int c = 0; c < kNumTrafficClasses; ++c) {
    if (options.ttl.ttl_ms[c] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ttl for class ", TrafficClassName(static_cast<TrafficClass>(c)), " must be > 0"));
    }
  }
  std::unique_ptr<SystemClock> owned_clock;
  const Clock* clock = options.clock;
  if (clock == nullptr) {
    owned_clock = std::make_unique<SystemClock>();
    clock = owned_clock.get();
  }
  std::unique_ptr<TieredKvStore> store(new TieredKvStore(options, clock));
  store->owned_clock_ = std::move(owned_clock);
  if (!options.disk_path.empty()) {
    DiskTierOptions disk_options;
    disk_options.path = options.disk_path;
    disk_options.capacity_bytes = options.disk_capacity_bytes;
    disk_options.compression = options.disk_compression;
    TANDEM_ASSIGN_OR_RETURN(store->disk_, DiskTier::Open(disk_options, clock, &store->events_));
  }
  for (int i = 0; i < options.fetch_threads; ++i) {
    store->fetch_threads_.emplace_back([s = store.get()] { s->FetchLoop(); });
  }
  if (options.background_thread) {
    store->background_thread_ = std::thread([s = store.get()] { s->BackgroundLoop(); });
  }
  return store;
}

TieredKvStore::~TieredKvStore() {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  background_cv_.notify_all();
  for (std::thread& t : fetch_threads_) t.join();
  if (background_thread_.joinable()) background_thread_.join();
}

absl::StatusOr<PutOutcome> TieredKvStore::Put(TrafficClass cls, std::uint64_t hash,
                                              std::uint64_t parent_hash,
                                              std::span<const std::uint8_t> bytes) {
  TANDEM_RETURN_IF_ERROR(ValidateTrafficClass(cls));
  if (bytes.empty()) return absl::InvalidArgumentError("block is empty (zero bytes)");
  if (bytes.size() > kMaxBlockBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("block of ", bytes.size(), " bytes exceeds the 4 GiB limit"));
  }
  const BlockKey key{cls, hash};
  const std::int64_t now = clock_->NowUnixMs();
  // Asked before taking the store lock so that host-memory calls never queue behind disk I/O.
  // A stale answer is harmless: a demotion then finds the block on disk already, or a dropped
  // "clean" copy turns out to have been evicted from disk (one more miss).
  const bool on_disk = disk_ != nullptr && disk_->Contains(key);
  auto bytes_copy = std::make_shared<const std::vector<std::uint8_t>>(bytes.begin(), bytes.end());
  std::lock_guard<std::mutex> lock(mu_);
  if (const HostTier::Entry* existing = host_.Find(key); existing != nullptr) {
    if (existing->expiry_unix_ms > now) {
      return absl::AlreadyExistsError(
          absl::StrCat("block ", hash, " (", TrafficClassName(cls), ") already in host memory"));
    }
    EraseHost(key);
    ++host_stats_.expirations;
  }
  if (!host_.Fits(bytes.size())) {
    // Copies already on disk cost nothing to drop; anything else would need a disk write the
    // caller must not wait for, so past that the new block is the one dropped.
    for (const BlockKey& cold : host_.ColdestFirst(kMaxCleanScan)) {
      if (host_.Fits(bytes.size())) break;
      const HostTier::Entry* entry = host_.Find(cold);
      if (entry->on_disk || entry->expiry_unix_ms <= now) {
        ++(entry->on_disk ? host_stats_.demotions : host_stats_.expirations);
        EraseHost(cold);
      }
    }
    if (!host_.Fits(bytes.size())) {
      ++host_stats_.dropped_puts;
      return PutOutcome::kDroppedFull;
    }
  }
  HostTier::Entry entry;
  entry.parent_hash = parent_hash;
  entry.expiry_unix_ms = now + options_.ttl.For(cls);
  entry.bytes = std::move(bytes_copy);
  entry.on_disk = on_disk;
  host_.Insert(key, std::move(entry));
  events_.Publish(KvTier::kHost, KvEvent::Kind::kStored, key, parent_hash);
  return PutOutcome::kStored;
}

void TieredKvStore::EraseHost(const BlockKey& key) {
  if (auto entry = host_.Erase(key)) {
    events_.Publish(KvTier::kHost, KvEvent::Kind::kRemoved, key, entry->parent_hash);
  }
}

bool TieredKvStore::InHost(const BlockKey& key, std::int64_t now_ms) const {
  const HostTier::Entry* entry = host_.Find(key);
  return entry != nullptr && entry->expiry_unix_ms > now_ms;
}

absl::StatusOr<LookupResult> TieredKvStore::Lookup(TrafficClass cls,
                                                   std::span<const std::uint64_t> chain) {
  TANDEM_RETURN_IF_ERROR(ValidateTrafficClass(cls));
  const std::int64_t now = clock_->NowUnixMs();
  LookupResult result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (result.tiers.size() < chain.size() &&
           InHost(BlockKey{cls, chain[result.tiers.size()]}, now)) {
      result.tiers.push_back(KvTier::kHost);
    }
  }
  result.host_prefix = result.tiers.size();
  // Past the host run blocks may sit in either tier. The disk index is asked without the store
  // lock held, so lookups never queue behind disk I/O.
  for (std::size_t i = result.host_prefix; i < chain.size(); ++i) {
    const BlockKey key{cls, chain[i]};
    bool in_host = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_host = InHost(key, now);
    }
    if (in_host) {
      result.tiers.push_back(KvTier::kHost);
    } else if (disk_ != nullptr && disk_->Contains(key)) {
      result.tiers.push_back(KvTier::kDisk);
    } else {
      break;
    }
  }
  result.available_prefix = result.tiers.size();
  const std::size_t host_hits = static_cast<std::size_t>(
      std::count(result.tiers.begin(), result.tiers.end(), KvTier::kHost));
  const std::size_t disk_hits = result.available_prefix - host_hits;
  std::lock_guard<std::mutex> lock(mu_);
  host_stats_.hits += host_hits;
  host_stats_.misses += chain.size() - host_hits;
  disk_fetch_stats_.hits += disk_hits;
  disk_fetch_stats_.misses += chain.size() - result.available_prefix;
  return result;
}

void TieredKvStore::Fetch(TrafficClass cls, std::span<const std::uint64_t> hashes,
                          std::span<const std::span<std::uint8_t>> buffers, FetchCallback done) {
  if (absl::Status valid = ValidateTrafficClass(cls); !valid.ok()) {
    done(FetchResult{0, valid});
    return;
  }
  if (hashes.size() != buffers.size()) {
    done(FetchResult{0, absl::InvalidArgumentError(absl::StrCat(
                            hashes.size(), " hashes but ", buffers.size(), " buffers"))});
    return;
  }
  auto job = std::make_shared<FetchJob>();
  job->cls = cls;
  job->hashes.assign(hashes.begin(), hashes.end());
  job->buffers.assign(buffers.begin(), buffers.end());
  job->done = std::move(done);
  job->started = SteadyClock::now();
  // Host blocks are copied right away (outside the lock: the bytes are immutable and shared).
  std::vector<BlockBytes> host_blocks;
  {
    const std::int64_t now = clock_->NowUnixMs();
    std::lock_guard<std::mutex> lock(mu_);
    for (std::uint64_t hash : job->hashes) {
      const BlockKey key{cls, hash};
      const HostTier::Entry* entry = host_.Find(key);
      if (entry == nullptr || entry->expiry_unix_ms <= now) break;
      host_.Touch(key);
      host_blocks.push_back(entry->bytes);
    }
  }
  for (const BlockBytes& bytes : host_blocks) {
    std::span<std::uint8_t> out = job->buffers[job->ready];
    if (out.size() != bytes->size()) {
      job->done(FetchResult{job->ready, absl::InvalidArgumentError(absl::StrCat(
                                            "buffer ", job->ready, " has ", out.size(),
                                            " bytes, block has ", bytes->size()))});
      return;
    }
    std::memcpy(out.data(), bytes->data(), out.size());
    ++job->ready;
  }
  if (job->ready == job->hashes.size() || disk_ == nullptr) {
    job->done(FetchResult{job->ready, absl::OkStatus()});
    return;
  }
  const std::size_t remaining = job->hashes.size() - job->ready;
  const int workers =
      static_cast<int>(std::min<std::size_t>(remaining, fetch_threads_.size()));
  job->next = job->ready;
  job->workers_left = workers;
  job->ok.assign(job->hashes.size(), 0);
  job->promote.resize(job->hashes.size());
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (!stopping_) {
      for (int i = 0; i < workers; ++i) fetch_queue_.push_back(job);
      job = nullptr;
    }
  }
  if (job != nullptr) {
    job->done(FetchResult{job->ready, absl::CancelledError("store is shutting down")});
    return;
  }
  if (workers == 1) {
    queue_cv_.notify_one();
  } else {
    queue_cv_.notify_all();
  }
}

std::future<FetchResult> TieredKvStore::Fetch(TrafficClass cls,
                                              std::span<const std::uint64_t> hashes,
                                              std::span<const std::span<std::uint8_t>> buffers) {
  auto promise = std::make_shared<std::promise<FetchResult>>();
  std::future<FetchResult> future = promise->get_future();
  Fetch(cls, hashes, buffers, [promise](FetchResult result) { promise->set_value(result); });
  return future;
}

void TieredKvStore::FetchLoop() {
  while (true) {
    std::shared_ptr<FetchJob> job;
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      queue_cv_.wait(lock, [this] { return stopping_ || !fetch_queue_.empty(); });
      if (fetch_queue_.empty()) return;  // stopping, nothing left
      job = std::move(fetch_queue_.front());
      fetch_queue_.pop_front();
    }
    RunFetchJob(*job);
  }
}

void TieredKvStore::RunFetchJob(FetchJob& job) {
  while (true) {
    const std::size_t i = job.next.fetch_add(1);
    if (i >= job.hashes.size() || i > job.first_failed.load()) break;
    const BlockKey key{job.cls, job.hashes[i]};
    std::span<std::uint8_t> out = job.buffers[i];
    BlockBytes host_bytes;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const HostTier::Entry* entry = host_.Find(key);
      if (entry != nullptr && entry->expiry_unix_ms > clock_->NowUnixMs()) {
        host_bytes = entry->bytes;
      }
    }
    if (host_bytes != nullptr && host_bytes->size() == out.size()) {
      std::memcpy(out.data(), host_bytes->data(), out.size());
      job.ok[i] = 1;
      continue;
    }
    absl::Status read = disk_->Read(key, out);
    if (!read.ok()) {
      if (absl::IsInvalidArgument(read)) {
        std::lock_guard<std::mutex> lock(job.status_mu);
        job.status = read;
      }
      // A miss ends the usable prefix; the caller recomputes from there.
      std::size_t failed = job.first_failed.load();
      while (i < failed && !job.first_failed.compare_exchange_weak(failed, i)) {
      }
      continue;
    }
    const auto latency_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                SteadyClock::now() - job.started)
                                .count();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++disk_fetch_stats_.promotions;
      disk_fetch_stats_.promotion_latency_us_sum += static_cast<std::uint64_t>(latency_us);
      disk_fetch_stats_.promotion_latency_us_max = std::max(
          disk_fetch_stats_.promotion_latency_us_max, static_cast<std::uint64_t>(latency_us));
    }
    // Copied before `done`: the caller owns the buffer again once it is called.
    job.promote[i].assign(out.begin(), out.end());
    job.ok[i] = 1;
  }
  // acq_rel: the last worker sees every other worker's ok/promote writes.
  if (job.workers_left.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  std::size_t ready = job.ready;
  while (ready < job.hashes.size() && job.ok[ready]) ++ready;
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(job.status_mu);
    status = job.status;
  }
  job.done(FetchResult{ready, status});
  for (std::size_t i = job.ready; i < ready; ++i) {
    if (!job.promote[i].empty()) {
      Promote(BlockKey{job.cls, job.hashes[i]}, job.promote[i]);
    }
  }
}

void TieredKvStore::Promote(const BlockKey& key, std::span<const std::uint8_t> bytes) {
  auto record = disk_->Describe(key);
  if (!record.ok()) return;  // evicted or expired since the read
  std::lock_guard<std::mutex> lock(mu_);
  // Never displace anything for a promotion: it is an optimisation, the disk copy stays.
  if (host_.Find(key) != nullptr || !host_.Fits(bytes.size())) return;
  HostTier::Entry entry;
  entry.parent_hash = record->parent_hash;
  entry.expiry_unix_ms = record->expiry_unix_ms;
  entry.bytes = std::make_shared<const std::vector<std::uint8_t>>(bytes.begin(), bytes.end());
  entry.on_disk = true;
  host_.Insert(key, std::move(entry));
  events_.Publish(KvTier::kHost, KvEvent::Kind::kStored, key, record->parent_hash);
}

absl::Status TieredKvStore::Touch(TrafficClass cls, std::span<const std::uint64_t> hashes) {
  TANDEM_RETURN_IF_ERROR(ValidateTrafficClass(cls));
  std::vector<BlockKey> not_in_host;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (std::uint64_t hash : hashes) {
      const BlockKey key{cls, hash};
      if (host_.Find(key) != nullptr) {
        host_.Touch(key);
      } else {
        not_in_host.push_back(key);
      }
    }
  }
  if (disk_ != nullptr) {
    for (const BlockKey& key : not_in_host) disk_->Touch(key);
  }
  return absl::OkStatus();
}

void TieredKvStore::SweepHostExpired(std::int64_t now_ms) {
  for (const BlockKey& key : host_.ExpiredKeys(now_ms)) {
    EraseHost(key);
    ++host_stats_.expirations;
  }
}

absl::Status TieredKvStore::Step() {
  std::lock_guard<std::mutex> step_lock(step_mu_);
  const std::int64_t now = clock_->NowUnixMs();
  bool sweep = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (now - last_ttl_sweep_ms_ >= options_.ttl_sweep_interval_ms) {
      SweepHostExpired(now);
      last_ttl_sweep_ms_ = now;
      sweep = true;
    }
  }
  if (sweep && disk_ != nullptr) TANDEM_RETURN_IF_ERROR(disk_->SweepExpired().status());
  TANDEM_RETURN_IF_ERROR(Demote(now));
  if (disk_ != nullptr && disk_dirty_ && options_.disk_sync_interval_ms > 0 &&
      now - last_disk_sync_ms_ >= options_.disk_sync_interval_ms) {
    TANDEM_RETURN_IF_ERROR(disk_->Sync());
    disk_dirty_ = false;
    last_disk_sync_ms_ = now;
  }
  if (disk_ != nullptr) {
    TANDEM_RETURN_IF_ERROR(
        disk_->EvictDownTo(Fraction(disk_->capacity_bytes(), options_.disk_low_watermark)));
  }
  return absl::OkStatus();
}

absl::Status TieredKvStore::Demote(std::int64_t now_ms) {
  const std::uint64_t target = Fraction(host_.capacity_bytes(), options_.host_low_watermark);
  while (true) {
    BlockKey key;
    HostTier::Entry victim;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (host_.used_bytes() <= target) return absl::OkStatus();
      key = host_.ColdestFirst(1).front();
      const HostTier::Entry* entry = host_.Find(key);
      if (entry->expiry_unix_ms <= now_ms) {
        EraseHost(key);
        ++host_stats_.expirations;
        continue;
      }
      if (disk_ == nullptr || entry->on_disk) {
        ++(disk_ == nullptr ? host_stats_.evictions : host_stats_.demotions);
        EraseHost(key);
        continue;
      }
      // Pacing: stop for this round once the bucket is dry; the next Step continues.
      if (!demotion_bucket_.TryTake(entry->bytes->size(), now_ms)) return absl::OkStatus();
      victim = *entry;
    }
    // The disk write happens without the lock so lookups and fetches are not held up by it.
    absl::Status put = disk_->Put(key, victim.parent_hash, victim.expiry_unix_ms, *victim.bytes);
    if (put.ok()) disk_dirty_ = true;
    std::lock_guard<std::mutex> lock(mu_);
    HostTier::Entry* entry = host_.FindMutable(key);
    const bool same = entry != nullptr && entry->bytes == victim.bytes;
    if (put.ok() || absl::IsAlreadyExists(put)) {
      if (same) {
        ++host_stats_.demotions;
        EraseHost(key);
      } else if (entry != nullptr) {
        entry->on_disk = true;
      }
    } else if (absl::IsResourceExhausted(put) || absl::IsInvalidArgument(put)) {
      // Larger than the whole disk tier, or expired meanwhile: it can only be dropped.
      if (same) {
        ++host_stats_.evictions;
        EraseHost(key);
      }
    } else {
      return put;
    }
  }
}

void TieredKvStore::BackgroundLoop() {
  std::unique_lock<std::mutex> lock(queue_mu_);
  while (!stopping_) {
    background_cv_.wait_for(lock, std::chrono::milliseconds(options_.background_interval_ms),
                       [this] { return stopping_; });
    if (stopping_) return;
    lock.unlock();
    // A failing disk must not stop host-memory maintenance; the next round retries.
    Step().IgnoreError();
    lock.lock();
  }
}

StoreSnapshot TieredKvStore::Snapshot() const {
  StoreSnapshot snapshot;
  snapshot.incarnation = incarnation_;
  std::lock_guard<std::mutex> host_lock(mu_);
  snapshot.host = host_.Snapshot();
  if (disk_ != nullptr) {
    std::lock_guard<std::mutex> disk_lock(disk_->mutex());
    std::lock_guard<std::mutex> events_lock(events_.mutex());
    snapshot.disk = disk_->SnapshotLocked();
    snapshot.seq = events_.last_seq_locked();
  } else {
    snapshot.seq = events_.last_seq();
  }
  return snapshot;
}

StoreStats TieredKvStore::Stats() const {
  StoreStats stats;
  std::lock_guard<std::mutex> lock(mu_);
  stats.host = host_stats_;
  stats.host.blocks = host_.num_blocks();
  stats.host.bytes = host_.used_bytes();
  stats.disk = disk_fetch_stats_;
  if (disk_ != nullptr) {
    const DiskTierStats disk = disk_->stats();
    stats.disk.blocks = disk.blocks;
    stats.disk.bytes = disk.bytes;
    stats.disk.evictions = disk.evictions;
    stats.disk.expirations = disk.expirations;
    stats.disk.corruptions = disk.corruptions;
  }
  return stats;
}

}  // namespace tandem::kv
