#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include <mutex>
#include "tandem/kv/types.h"

namespace tandem::kv {

// One change to what a tier holds. seq starts at 1 and increases by one per event within a store
// incarnation, so a consumer that sees a jump knows it missed events and must resync from a
// snapshot.
struct KvEvent {
  enum class Kind : std::uint8_t { kStored, kRemoved };
  std::uint64_t seq = 0;
  KvTier tier = KvTier::kHost;
  Kind kind = Kind::kStored;
  BlockKey key;
  std::uint64_t parent_hash = 0;
};

// Bounded, ordered, thread-safe event buffer. Publishing never blocks on consumers: when the
// buffer is full the oldest events are dropped and a late reader gets OutOfRange (a gap).
class EventLog {
 public:
  explicit EventLog(std::size_t capacity);

  // Assigns the next sequence number; returns it.
  std::uint64_t Publish(KvTier tier, KvEvent::Kind kind, const BlockKey& key,
                        std::uint64_t parent_hash);

  // Events with seq > after_seq, oldest first, at most max_events. OutOfRange when some of them
  // were already dropped: the consumer must resync from a snapshot.
  absl::StatusOr<std::vector<KvEvent>> ReadAfter(std::uint64_t after_seq,
                                                 std::size_t max_events) const;

  std::uint64_t last_seq() const;
  // For snapshots: the caller holds the lock while it collects state, so that the returned seq
  // and the state agree.
  std::mutex& mutex() const ABSL_LOCK_RETURNED(mu_) { return mu_; }
  std::uint64_t last_seq_locked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return next_seq_ - 1; }

 private:
  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::deque<KvEvent> events_ ABSL_GUARDED_BY(mu_);
  std::uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace tandem::kv
