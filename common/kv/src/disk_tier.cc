#include "tandem/kv/disk_tier.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "disk_value.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "tandem/base/status_macros.h"

namespace tandem::kv {
namespace {

absl::Status FromRocks(const rocksdb::Status& s, absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("rocksdb ", what, ": ", s.ToString()));
}

rocksdb::Options DbOptions() {
  rocksdb::Options options;
  options.create_if_missing = true;
  // Blocks are compressed (or not) per value, where we know whether it paid; a second pass by
  // RocksDB over incompressible float bytes would only burn CPU.
  options.compression = rocksdb::kNoCompression;
  // KV blocks are large: keep them out of the LSM tree so compaction does not rewrite them.
  options.enable_blob_files = true;
  options.min_blob_size = 4096;
  options.enable_blob_garbage_collection = true;
  options.max_background_jobs = 2;
  return options;
}

// A cache can lose its newest blocks in a crash (they are recomputed), so block writes skip the
// WAL: each block is written once, to a blob file at flush, instead of twice. A clean shutdown
// flushes the memtable, so restarts keep everything.
rocksdb::WriteOptions WriteOpts() {
  rocksdb::WriteOptions options;
  options.disableWAL = true;
  return options;
}

}  // namespace

DiskTier::DiskTier(const DiskTierOptions& options, const Clock* clock, EventLog* events,
                   std::unique_ptr<rocksdb::DB> db)
    : options_(options), clock_(clock), events_(events), db_(std::move(db)) {}

DiskTier::~DiskTier() {
  if (db_ != nullptr) db_->Close().PermitUncheckedError();
}

absl::StatusOr<std::unique_ptr<DiskTier>> DiskTier::Open(const DiskTierOptions& options,
                                                         const Clock* clock, EventLog* events) {
  if (options.path.empty()) return absl::InvalidArgumentError("disk tier path is empty");
  if (options.capacity_bytes == 0) {
    return absl::InvalidArgumentError("disk tier capacity_bytes must be > 0");
  }
  if (clock == nullptr || events == nullptr) {
    return absl::InvalidArgumentError("disk tier needs a clock and an event log");
  }
  rocksdb::DB* raw = nullptr;
  TANDEM_RETURN_IF_ERROR(
      FromRocks(rocksdb::DB::Open(DbOptions(), options.path, &raw),
                absl::StrCat("open '", options.path, "'")));
  std::unique_ptr<DiskTier> tier(
      new DiskTier(options, clock, events, std::unique_ptr<rocksdb::DB>(raw)));
  TANDEM_RETURN_IF_ERROR(tier->LoadIndex());
  return tier;
}

absl::Status DiskTier::LoadIndex() {
  const std::int64_t now = clock_->NowUnixMs();
  struct Loaded {
    BlockKey key;
    IndexEntry entry;
    std::int64_t written_ms;
  };
  std::vector<Loaded> loaded;
  std::vector<std::string> unusable;
  std::uint64_t expired = 0;
  {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      auto key = disk_value::DecodeKey(it->key());
      auto header = key.ok() ? disk_value::ParseHeader(it->value())
                             : absl::StatusOr<disk_value::Header>(key.status());
      if (!header.ok()) {
        unusable.push_back(it->key().ToString());
        continue;
      }
      if (header->expiry_unix_ms <= now) {
        unusable.push_back(it->key().ToString());
        ++expired;
        continue;
      }
      IndexEntry entry;
      entry.parent_hash = header->parent_hash;
      entry.size_bytes = header->uncompressed_len;
      entry.stored_bytes = it->value().size();
      entry.expiry_unix_ms = header->expiry_unix_ms;
      loaded.push_back(Loaded{*key, entry, header->written_unix_ms});
    }
    TANDEM_RETURN_IF_ERROR(FromRocks(it->status(), "scan on open"));
  }
  for (const std::string& key : unusable) {
    TANDEM_RETURN_IF_ERROR(FromRocks(db_->Delete(rocksdb::WriteOptions(), key), "delete"));
  }
  // No access history survives a restart; the oldest written is the best guess of the coldest.
  std::stable_sort(loaded.begin(), loaded.end(),
                   [](const Loaded& a, const Loaded& b) { return a.written_ms < b.written_ms; });
  std::lock_guard<std::mutex> lock(mu_);
  stats_.expirations += expired;
  stats_.corruptions += unusable.size() - expired;
  for (Loaded& block : loaded) {
    // Warm restart: announce what survived so routers can send matching prefixes here again.
    IndexInsertLocked(block.key, block.entry, /*most_recent=*/true);
  }
  // A smaller capacity than last time: shed the oldest now rather than on the next write.
  while (used_bytes_ > options_.capacity_bytes && !lru_.empty()) {
    TANDEM_RETURN_IF_ERROR(RemoveLocked(lru_.front()));
    ++stats_.evictions;
  }
  return absl::OkStatus();
}

void DiskTier::IndexInsertLocked(const BlockKey& key, IndexEntry entry, bool most_recent) {
  lru_.insert(most_recent ? lru_.end() : lru_.begin(), key);
  entry.lru_pos = most_recent ? std::prev(lru_.end()) : lru_.begin();
  used_bytes_ += entry.stored_bytes;
  const std::uint64_t parent = entry.parent_hash;
  index_.insert_or_assign(key, std::move(entry));
  stats_.blocks = index_.size();
  stats_.bytes = used_bytes_;
  events_->Publish(KvTier::kDisk, KvEvent::Kind::kStored, key, parent);
}

absl::Status DiskTier::RemoveLocked(BlockKey key) {
  auto it = index_.find(key);
  if (it == index_.end()) return absl::NotFoundError("block not on disk");
  TANDEM_RETURN_IF_ERROR(
      FromRocks(db_->Delete(rocksdb::WriteOptions(), disk_value::EncodeKey(key)), "delete"));
  const std::uint64_t parent = it->second.parent_hash;
  used_bytes_ -= it->second.stored_bytes;
  lru_.erase(it->second.lru_pos);
  index_.erase(it);
  stats_.blocks = index_.size();
  stats_.bytes = used_bytes_;
  events_->Publish(KvTier::kDisk, KvEvent::Kind::kRemoved, key, parent);
  return absl::OkStatus();
}

absl::Status DiskTier::Put(const BlockKey& key, std::uint64_t parent_hash,
                           std::int64_t expiry_unix_ms, std::span<const std::uint8_t> bytes) {
  TANDEM_RETURN_IF_ERROR(ValidateTrafficClass(key.cls));
  if (bytes.empty()) return absl::InvalidArgumentError("block is empty");
  if (bytes.size() > disk_value::kMaxBlockBytes) {
    return absl::InvalidArgumentError(absl::StrCat("block of ", bytes.size(),
                                                   " bytes exceeds the 4 GiB disk format limit"));
  }
  const std::int64_t now = clock_->NowUnixMs();
  if (expiry_unix_ms <= now) return absl::InvalidArgumentError("block is already expired");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (index_.contains(key)) return absl::AlreadyExistsError("block already on disk");
  }
  // Compress outside the lock: it is the expensive part and touches no shared state.
  disk_value::Header header;
  header.expiry_unix_ms = expiry_unix_ms;
  header.parent_hash = parent_hash;
  header.written_unix_ms = now;
  bool compressed = false;
  const std::string value =
      disk_value::EncodeValue(key, header, bytes, options_.compression, &compressed);
  if (value.size() > options_.capacity_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("block needs ", value.size(),
                                                     " bytes, disk capacity is ",
                                                     options_.capacity_bytes));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (index_.contains(key)) return absl::AlreadyExistsError("block already on disk");
  while (used_bytes_ + value.size() > options_.capacity_bytes && !lru_.empty()) {
    TANDEM_RETURN_IF_ERROR(RemoveLocked(lru_.front()));
    ++stats_.evictions;
  }
  TANDEM_RETURN_IF_ERROR(
      FromRocks(db_->Put(WriteOpts(), disk_value::EncodeKey(key), value), "put"));
  IndexEntry entry;
  entry.parent_hash = parent_hash;
  entry.size_bytes = bytes.size();
  entry.stored_bytes = value.size();
  entry.expiry_unix_ms = expiry_unix_ms;
  IndexInsertLocked(key, entry, /*most_recent=*/true);
  stats_.bytes_written += bytes.size();
  if (compressed) ++stats_.compressed_blocks;
  return absl::OkStatus();
}

absl::Status DiskTier::Read(const BlockKey& key, std::span<std::uint8_t> out) {
  TANDEM_RETURN_IF_ERROR(ValidateTrafficClass(key.cls));
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) {
      ++stats_.misses;
      return absl::NotFoundError("block not on disk");
    }
    if (it->second.expiry_unix_ms <= clock_->NowUnixMs()) {
      TANDEM_RETURN_IF_ERROR(RemoveLocked(key));
      ++stats_.expirations;
      ++stats_.misses;
      return absl::NotFoundError("block on disk expired");
    }
    if (it->second.size_bytes != out.size()) {
      return absl::InvalidArgumentError(absl::StrCat("buffer has ", out.size(),
                                                     " bytes, block has ", it->second.size_bytes));
    }
  }
  std::string value;
  const rocksdb::Status got =
      db_->Get(rocksdb::ReadOptions(), disk_value::EncodeKey(key), &value);
  if (!got.ok() && !got.IsNotFound()) return FromRocks(got, "get");
  absl::Status decoded = got.IsNotFound() ? absl::DataLossError("indexed block missing")
                                          : absl::OkStatus();
  if (decoded.ok()) {
    auto header = disk_value::ParseHeader(value);
    decoded = header.ok() ? disk_value::DecodeBlock(key, value, *header, out) : header.status();
  }
  if (absl::IsInvalidArgument(decoded)) return decoded;
  if (!decoded.ok()) {
    DropUnusable(key, got.IsNotFound());
    return absl::NotFoundError(absl::StrCat("block on disk unusable: ", decoded.message()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.hits;
  stats_.bytes_read += out.size();
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.splice(lru_.end(), lru_, it->second.lru_pos);
  }
  return absl::OkStatus();
}

void DiskTier::DropUnusable(const BlockKey& key, bool missing) {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.misses;
  ++stats_.corruptions;
  // Re-check under the lock: a Put may have replaced the entry since the failed read.
  std::string value;
  const rocksdb::Status got =
      db_->Get(rocksdb::ReadOptions(), disk_value::EncodeKey(key), &value);
  if (got.ok() && !missing) {
    auto header = disk_value::ParseHeader(value);
    if (header.ok()) {
      std::vector<std::uint8_t> scratch(header->uncompressed_len);
      if (disk_value::DecodeBlock(key, value, *header, scratch).ok()) return;
    }
  }
  RemoveLocked(key).IgnoreError();
}

absl::StatusOr<std::vector<std::uint8_t>> DiskTier::Get(const BlockKey& key) {
  TANDEM_ASSIGN_OR_RETURN(BlockRecord record, Describe(key));
  std::vector<std::uint8_t> out(record.size_bytes);
  TANDEM_RETURN_IF_ERROR(Read(key, out));
  return out;
}

bool DiskTier::Contains(const BlockKey& key) const { return Describe(key).ok(); }

absl::StatusOr<BlockRecord> DiskTier::Describe(const BlockKey& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end() || it->second.expiry_unix_ms <= clock_->NowUnixMs()) {
    return absl::NotFoundError("block not on disk");
  }
  return BlockRecord{key, it->second.parent_hash, it->second.size_bytes,
                     it->second.expiry_unix_ms};
}

void DiskTier::Touch(const BlockKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.splice(lru_.end(), lru_, it->second.lru_pos);
  }
}

absl::Status DiskTier::Remove(const BlockKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return RemoveLocked(key);
}

absl::StatusOr<std::size_t> DiskTier::SweepExpired() {
  const std::int64_t now = clock_->NowUnixMs();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<BlockKey> expired;
  for (const auto& [key, entry] : index_) {
    if (entry.expiry_unix_ms <= now) expired.push_back(key);
  }
  for (const BlockKey& key : expired) {
    TANDEM_RETURN_IF_ERROR(RemoveLocked(key));
    ++stats_.expirations;
  }
  return expired.size();
}

absl::Status DiskTier::EvictDownTo(std::uint64_t target_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  while (used_bytes_ > target_bytes && !lru_.empty()) {
    TANDEM_RETURN_IF_ERROR(RemoveLocked(lru_.front()));
    ++stats_.evictions;
  }
  return absl::OkStatus();
}

std::vector<BlockRecord> DiskTier::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return SnapshotLocked();
}

std::vector<BlockRecord> DiskTier::SnapshotLocked() const {
  std::vector<BlockRecord> records;
  records.reserve(index_.size());
  for (const auto& [key, entry] : index_) {
    records.push_back(BlockRecord{key, entry.parent_hash, entry.size_bytes, entry.expiry_unix_ms});
  }
  return records;
}

DiskTierStats DiskTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::uint64_t DiskTier::used_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_bytes_;
}

absl::Status DiskTier::Sync() {
  TANDEM_RETURN_IF_ERROR(FromRocks(db_->FlushWAL(/*sync=*/true), "flush wal"));
  return FromRocks(db_->Flush(rocksdb::FlushOptions()), "flush");
}

}  // namespace tandem::kv
