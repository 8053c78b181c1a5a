#include "embedding_cache.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "tandem/security/digest.h"

namespace tandem::encoder {

// One tower run that later identical requests wait for instead of running their own. The
// leases of every waiter are made when the result is inserted, under the same lock, so no
// eviction can slip between the insertion and a waiter's pin.
struct EmbeddingCache::InFlight {
  std::vector<std::chrono::milliseconds> waiter_leases;  // guarded by the cache's mu_
  std::vector<absl::StatusOr<Pinned>> waiter_results;    // written once, before `done`
  absl::Notification done;
};

EmbeddingCache::EmbeddingCache(EmbeddingCacheOptions options)
    : options_(std::move(options)),
      lease_prefix_(absl::BytesToHexString(security::RandomBytes(8))) {}

std::chrono::milliseconds EmbeddingCache::ClampLease(std::chrono::milliseconds lease) const {
  if (lease.count() <= 0) lease = options_.default_lease;
  return std::min(lease, options_.max_lease);
}

EmbeddingCache::Pinned EmbeddingCache::PinLocked(const std::string& key, Entry& entry,
                                                 std::chrono::milliseconds lease, bool hit) {
  ++entry.pins;
  lru_.splice(lru_.begin(), lru_, entry.lru);
  std::string lease_id = absl::StrCat(lease_prefix_, "-", ++next_lease_);
  const auto expires = options_.now() + ClampLease(lease);
  leases_.emplace(lease_id, Lease{key, expires});
  by_expiry_.emplace(expires, lease_id);
  return Pinned{entry.embedding, std::move(lease_id), hit};
}

void EmbeddingCache::UnpinLocked(const std::string& key) {
  auto it = entries_.find(key);
  if (it != entries_.end() && it->second.pins > 0) --it->second.pins;
}

void EmbeddingCache::ExpireLocked() {
  const auto now = options_.now();
  while (!by_expiry_.empty() && by_expiry_.begin()->first <= now) {
    auto lease = leases_.find(by_expiry_.begin()->second);
    UnpinLocked(lease->second.key);
    ++counters_.leases_expired;
    leases_.erase(lease);
    by_expiry_.erase(by_expiry_.begin());
  }
  // Entries over the budget (the budget shrank, or pins held them past it) go as pins end.
  MakeRoomLocked(0);
}

bool EmbeddingCache::MakeRoomLocked(std::size_t incoming) {
  if (incoming > options_.max_bytes) return false;
  auto it = lru_.end();
  while (bytes_held_ + incoming > options_.max_bytes && it != lru_.begin()) {
    --it;
    auto entry = entries_.find(*it);
    if (entry->second.pins > 0) continue;
    bytes_held_ -= entry->second.embedding->bytes();
    ++counters_.evictions;
    entries_.erase(entry);
    it = lru_.erase(it);
  }
  return bytes_held_ + incoming <= options_.max_bytes;
}

absl::StatusOr<EmbeddingCache::Pinned> EmbeddingCache::GetOrCompute(
    const std::string& key, std::chrono::milliseconds lease, const ComputeFn& compute) {
  std::shared_ptr<InFlight> flight;
  std::size_t waiter = 0;
  {
    absl::MutexLock lock(&mu_);
    ExpireLocked();
    if (auto it = entries_.find(key); it != entries_.end()) {
      ++counters_.hits;
      return PinLocked(key, it->second, lease, /*hit=*/true);
    }
    if (auto it = in_flight_.find(key); it != in_flight_.end()) {
      flight = it->second;
      waiter = flight->waiter_leases.size();
      flight->waiter_leases.push_back(lease);
      flight->waiter_results.emplace_back(absl::UnknownError("pending"));
      ++counters_.joined;
    } else {
      ++counters_.misses;
      ++counters_.computes;
      in_flight_.emplace(key, std::make_shared<InFlight>());
    }
  }
  if (flight != nullptr) {
    flight->done.WaitForNotification();
    return std::move(flight->waiter_results[waiter]);
  }

  absl::StatusOr<Embedding> computed = compute();
  absl::MutexLock lock(&mu_);
  auto node = in_flight_.extract(key);
  std::shared_ptr<InFlight> mine = std::move(node.mapped());
  absl::StatusOr<Pinned> result;
  if (!computed.ok()) {
    result = computed.status();
  } else if (!MakeRoomLocked(computed->bytes())) {
    ++counters_.refused_full;
    result = absl::ResourceExhaustedError(absl::StrCat(
        "embedding cache full: ", computed->bytes(), " bytes do not fit in ", options_.max_bytes,
        " with ", bytes_held_, " pinned by leases"));
  } else {
    auto embedding = std::make_shared<const Embedding>(std::move(*computed));
    bytes_held_ += embedding->bytes();
    lru_.push_front(key);
    Entry& entry = entries_[key];
    entry.embedding = std::move(embedding);
    entry.lru = lru_.begin();
    result = PinLocked(key, entry, lease, /*hit=*/false);
    for (std::size_t i = 0; i < mine->waiter_leases.size(); ++i) {
      mine->waiter_results[i] = PinLocked(key, entry, mine->waiter_leases[i], /*hit=*/false);
    }
  }
  if (!result.ok()) {
    for (auto& r : mine->waiter_results) r = result.status();
  }
  mine->done.Notify();
  return result;
}

absl::StatusOr<EmbeddingCache::Pinned> EmbeddingCache::Pin(const std::string& key,
                                                           std::chrono::milliseconds lease) {
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    ++counters_.misses;
    return absl::NotFoundError(absl::StrCat("no cached embedding for ", key));
  }
  ++counters_.hits;
  return PinLocked(key, it->second, lease, /*hit=*/true);
}

absl::StatusOr<std::shared_ptr<const Embedding>> EmbeddingCache::Leased(
    const std::string& lease_id) {
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  auto lease = leases_.find(lease_id);
  if (lease == leases_.end()) {
    return absl::NotFoundError(absl::StrCat("no live embedding lease ", lease_id));
  }
  // A live lease pins its entry, so the entry is there.
  return entries_.at(lease->second.key).embedding;
}

bool EmbeddingCache::Release(const std::string& lease_id) {
  absl::MutexLock lock(&mu_);
  auto lease = leases_.find(lease_id);
  const bool found = lease != leases_.end();
  if (found) {
    UnpinLocked(lease->second.key);
    by_expiry_.erase({lease->second.expires, lease_id});
    leases_.erase(lease);
  }
  ExpireLocked();
  return found;
}

void EmbeddingCache::ExpireLeases() {
  absl::MutexLock lock(&mu_);
  ExpireLocked();
}

EmbeddingCacheStats EmbeddingCache::stats() const {
  absl::MutexLock lock(&mu_);
  EmbeddingCacheStats s = counters_;
  s.bytes_held = bytes_held_;
  s.entries = entries_.size();
  s.leases = leases_.size();
  s.pinned_entries = static_cast<std::size_t>(
      std::count_if(entries_.begin(), entries_.end(), [](const auto& e) { return e.second.pins > 0; }));
  return s;
}

}  // namespace tandem::encoder
