#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace tandem::encoder {

// One image's rows after the vision tower and projector.
struct Embedding {
  int rows = 0;
  int hidden = 0;
  int width = 0;   // after preprocessing
  int height = 0;
  std::vector<float> data;  // rows x hidden
  std::size_t bytes() const { return data.size() * sizeof(float); }
};

struct EmbeddingCacheOptions {
  std::size_t max_bytes = std::size_t{1} << 30;
  std::chrono::milliseconds default_lease{30000};
  std::chrono::milliseconds max_lease{600000};
  // Injected so that tests drive lease expiry without sleeping.
  std::function<std::chrono::steady_clock::time_point()> now = std::chrono::steady_clock::now;
};

struct EmbeddingCacheStats {
  std::size_t bytes_held = 0;
  std::size_t entries = 0;
  std::size_t pinned_entries = 0;
  std::size_t leases = 0;
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t computes = 0;        // tower runs (a failed one included)
  std::uint64_t joined = 0;          // requests that waited for an identical one in flight
  std::uint64_t evictions = 0;
  std::uint64_t leases_expired = 0;
  std::uint64_t refused_full = 0;    // nothing unpinned left to evict
};

// Byte-bounded LRU of embeddings keyed by content key, with three guarantees the encoder needs:
// identical concurrent requests run the tower once (the others wait for its result); an entry is
// pinned while any lease on it lives (a prefill has been told to fetch it), so eviction never
// pulls rows from under a fetch; and every lease ends, by Release or by expiry, so pins cannot
// leak when a prefill dies. Thread-safe.
class EmbeddingCache {
 public:
  using ComputeFn = std::function<absl::StatusOr<Embedding>()>;

  struct Pinned {
    std::shared_ptr<const Embedding> embedding;
    std::string lease_id;
    bool hit = false;  // false: this call (or one it joined) ran the tower
  };

  explicit EmbeddingCache(EmbeddingCacheOptions options);

  // The entry under `key`, computed by `compute` when absent (once across concurrent callers),
  // pinned under a new lease of `lease` (0: the default; capped at max_lease). A failed
  // computation is returned to every waiter and not cached. RESOURCE_EXHAUSTED when the result
  // does not fit even after evicting every unpinned entry.
  absl::StatusOr<Pinned> GetOrCompute(const std::string& key, std::chrono::milliseconds lease,
                                      const ComputeFn& compute);
  // Pins an entry that is already cached; NOT_FOUND when it is not (evicted or never computed).
  absl::StatusOr<Pinned> Pin(const std::string& key, std::chrono::milliseconds lease);
  // The embedding a live lease pins; NOT_FOUND when the lease is unknown or expired.
  absl::StatusOr<std::shared_ptr<const Embedding>> Leased(const std::string& lease_id);
  // Ends a lease early (the prefill has the rows). False when it was unknown or already over.
  bool Release(const std::string& lease_id);
  // Ends expired leases and evicts what no longer fits; every public call does it too.
  void ExpireLeases();

  EmbeddingCacheStats stats() const;

 private:
  struct Entry {
    std::shared_ptr<const Embedding> embedding;
    int pins = 0;
    std::list<std::string>::iterator lru;  // position in lru_ (front: most recent)
  };
  struct Lease {
    std::string key;
    std::chrono::steady_clock::time_point expires;
  };
  struct InFlight;

  std::chrono::milliseconds ClampLease(std::chrono::milliseconds lease) const;
  Pinned PinLocked(const std::string& key, Entry& entry, std::chrono::milliseconds lease, bool hit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpireLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UnpinLocked(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Evicts unpinned entries, least recent first, until `incoming` more bytes fit.
  bool MakeRoomLocked(std::size_t incoming) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const EmbeddingCacheOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> lru_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Lease> leases_ ABSL_GUARDED_BY(mu_);
  // The same leases by expiry: every call expires what is due, and with thousands of leases out
  // a scan of all of them per call would cost more than the call.
  std::set<std::pair<std::chrono::steady_clock::time_point, std::string>> by_expiry_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<InFlight>> in_flight_ ABSL_GUARDED_BY(mu_);
  std::size_t bytes_held_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t next_lease_ ABSL_GUARDED_BY(mu_) = 0;
  std::string lease_prefix_;  // random per cache: lease ids of one process are not guessable
  EmbeddingCacheStats counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::encoder
