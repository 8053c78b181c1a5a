#include "tandem/routing/kv_index.h"

#include <bit>

#include "absl/strings/str_cat.h"

namespace tandem::routing {
namespace {

bool ValidTier(Tier tier) {
  const int t = static_cast<int>(tier);
  return t >= 0 && t < kNumTiers;
}

// Far enough ahead to overlap several cache misses, near enough to stay in L1.
constexpr std::size_t kPrefetchDistance = 8;

template <typename Fn>
void ForEachSlot(WorkerMask mask, Fn&& fn) {
  while (mask != 0) {
    fn(std::countr_zero(mask));
    mask &= mask - 1;
  }
}

}  // namespace

KvIndex::KvIndex(Options options) : options_(options) {
  if (options_.max_blocks == 0) options_.max_blocks = 1;
  map_.reserve(options_.max_blocks + 1);
  nodes_.reserve(options_.max_blocks + 1);
}

absl::Status KvIndex::CheckWorker(WorkerSlot w) const {
  if (w < 0 || w >= kMaxWorkers) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker slot ", w, " outside [0, ", kMaxWorkers, ")"));
  }
  if ((known_ & SlotBit(w)) == 0) {
    return absl::InvalidArgumentError(absl::StrCat("worker slot ", w, " is not registered"));
  }
  return absl::OkStatus();
}

absl::Status KvIndex::AddWorker(WorkerSlot w, std::uint64_t incarnation) {
  if (w < 0 || w >= kMaxWorkers) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker slot ", w, " outside [0, ", kMaxWorkers, ")"));
  }
  if ((known_ & SlotBit(w)) != 0) {
    if (workers_[w].incarnation == incarnation) return absl::OkStatus();
    ClearWorker(w);
  }
  known_ |= SlotBit(w);
  stale_ &= ~SlotBit(w);
  workers_[w] = WorkerInfo{.incarnation = incarnation};
  return absl::OkStatus();
}

absl::Status KvIndex::RemoveWorker(WorkerSlot w) {
  if (absl::Status s = CheckWorker(w); !s.ok()) return s;
  ClearWorker(w);
  known_ &= ~SlotBit(w);
  stale_ &= ~SlotBit(w);
  workers_[w] = WorkerInfo{};
  return absl::OkStatus();
}

absl::StatusOr<EventOutcome> KvIndex::Apply(WorkerSlot w, const KvEvent& event) {
  if (absl::Status s = CheckWorker(w); !s.ok()) return s;
  WorkerInfo& info = workers_[w];
  if (event.kind == KvEvent::Kind::kSnapshot) {
    for (const KvEvent::TierBlocks& tb : event.snapshot) {
      if (!ValidTier(tb.tier)) {
        return absl::InvalidArgumentError(absl::StrCat("snapshot tier ", static_cast<int>(tb.tier),
                                                       " from worker ", w, " is not a KV tier"));
      }
    }
    // A snapshot is authoritative whatever its seq: it restarts the sequence.
    ClearWorker(w);
    for (const KvEvent::TierBlocks& tb : event.snapshot) Store(w, tb.tier, tb.block_hashes);
    info.last_seq = event.seq;
    info.stale = false;
    stale_ &= ~SlotBit(w);
    return EventOutcome::kApplied;
  }
  if (!ValidTier(event.tier)) {
    return absl::InvalidArgumentError(absl::StrCat("event tier ", static_cast<int>(event.tier),
                                                   " from worker ", w, " is not a KV tier"));
  }
  if (info.stale) return EventOutcome::kIgnoredStale;
  if (event.seq <= info.last_seq) return EventOutcome::kDuplicate;
  if (event.seq != info.last_seq + 1) {
    info.stale = true;
    stale_ |= SlotBit(w);
    return EventOutcome::kGap;
  }
  info.last_seq = event.seq;
  if (event.kind == KvEvent::Kind::kStored) {
    Store(w, event.tier, event.block_hashes);
  } else {
    Remove(w, event.tier, event.block_hashes);
  }
  return EventOutcome::kApplied;
}

absl::StatusOr<EventOutcome> KvIndex::ObserveSeq(WorkerSlot w, std::uint64_t last_seq) {
  if (absl::Status s = CheckWorker(w); !s.ok()) return s;
  WorkerInfo& info = workers_[w];
  if (info.stale) return EventOutcome::kIgnoredStale;
  if (last_seq <= info.last_seq) return EventOutcome::kApplied;
  info.stale = true;
  stale_ |= SlotBit(w);
  return EventOutcome::kGap;
}

bool KvIndex::IsStale(WorkerSlot w) const {
  return w >= 0 && w < kMaxWorkers && (stale_ & SlotBit(w)) != 0;
}

std::uint64_t KvIndex::last_seq(WorkerSlot w) const {
  return (w >= 0 && w < kMaxWorkers) ? workers_[w].last_seq : 0;
}

std::int64_t KvIndex::blocks_on(WorkerSlot w, Tier tier) const {
  if (w < 0 || w >= kMaxWorkers || !ValidTier(tier)) return 0;
  return workers_[w].blocks[static_cast<int>(tier)];
}

std::int64_t KvIndex::evicted_blocks(WorkerSlot w) const {
  return (w >= 0 && w < kMaxWorkers) ? workers_[w].evicted : 0;
}

void KvIndex::Match(std::span<const BlockHash> chain, WorkerMask candidates,
                    MatchResult* out) const {
  out->workers.fill(WorkerOverlap{});
  WorkerMask alive = candidates & known_ & ~stale_;
  for (std::size_t i = 0; i < chain.size() && alive != 0; ++i) {
    // Independent lookups: start the next ones' memory loads before this one's is needed.
    if (i + kPrefetchDistance < chain.size()) map_.prefetch(chain[i + kPrefetchDistance]);
    auto it = map_.find(chain[i]);
    if (it == map_.end()) return;
    const Entry& entry = it->second;
    const WorkerMask device = entry.owners[0] & alive;
    const WorkerMask host = entry.owners[1] & alive & ~device;
    const WorkerMask disk = entry.owners[2] & alive & ~device & ~host;
    alive = device | host | disk;
    ForEachSlot(device, [out](int w) { ++out->workers[w].device; });
    ForEachSlot(host, [out](int w) { ++out->workers[w].host; });
    ForEachSlot(disk, [out](int w) { ++out->workers[w].disk; });
  }
}

void KvIndex::Touch(std::span<const BlockHash> chain) {
  touch_scratch_.clear();
  for (std::size_t i = 0; i < chain.size(); ++i) {
    if (i + kPrefetchDistance < chain.size()) map_.prefetch(chain[i + kPrefetchDistance]);
    auto it = map_.find(chain[i]);
    if (it == map_.end()) break;
    touch_scratch_.push_back(it->second.node);
  }
  // Leaves first, roots last: roots end up most recent and are pruned last.
  for (auto n = touch_scratch_.rbegin(); n != touch_scratch_.rend(); ++n) {
    Unlink(*n);
    PushFront(*n);
  }
}

void KvIndex::Store(WorkerSlot w, Tier tier, std::span<const BlockHash> hashes) {
  if (w < 0 || w >= kMaxWorkers || !ValidTier(tier)) return;
  const int t = static_cast<int>(tier);
  const WorkerMask bit = SlotBit(w);
  // Stored blocks run root to leaf; inserting leaves first leaves the roots most recent.
  for (auto it = hashes.rbegin(); it != hashes.rend(); ++it) {
    Entry& entry = FindOrCreate(*it);
    if ((entry.owners[t] & bit) == 0) {
      entry.owners[t] |= bit;
      ++workers_[w].blocks[t];
    }
  }
  Prune();
}

void KvIndex::Remove(WorkerSlot w, Tier tier, std::span<const BlockHash> hashes) {
  if (w < 0 || w >= kMaxWorkers || !ValidTier(tier)) return;
  const int t = static_cast<int>(tier);
  const WorkerMask bit = SlotBit(w);
  for (BlockHash hash : hashes) {
    auto it = map_.find(hash);
    if (it == map_.end()) continue;
    Entry& entry = it->second;
    if ((entry.owners[t] & bit) == 0) continue;
    entry.owners[t] &= ~bit;
    --workers_[w].blocks[t];
    if (((entry.owners[0] | entry.owners[1] | entry.owners[2]) & bit) == 0) ++workers_[w].evicted;
    if (entry.empty()) Erase(hash);
  }
}

KvIndex::Entry& KvIndex::FindOrCreate(BlockHash hash) {
  auto [it, inserted] = map_.try_emplace(hash);
  Entry& entry = it->second;
  if (!inserted) {
    Unlink(entry.node);
    PushFront(entry.node);
    return entry;
  }
  std::uint32_t n;
  if (!free_.empty()) {
    n = free_.back();
    free_.pop_back();
    nodes_[n] = Node{};
  } else {
    n = static_cast<std::uint32_t>(nodes_.size());
    nodes_.emplace_back();
  }
  nodes_[n].hash = hash;
  entry.node = n;
  PushFront(n);
  return entry;
}

void KvIndex::Unlink(std::uint32_t n) {
  Node& node = nodes_[n];
  if (node.prev != kNil) nodes_[node.prev].next = node.next; else head_ = node.next;
  if (node.next != kNil) nodes_[node.next].prev = node.prev; else tail_ = node.prev;
  node.prev = node.next = kNil;
}

void KvIndex::PushFront(std::uint32_t n) {
  Node& node = nodes_[n];
  node.prev = kNil;
  node.next = head_;
  if (head_ != kNil) nodes_[head_].prev = n;
  head_ = n;
  if (tail_ == kNil) tail_ = n;
}

void KvIndex::Erase(BlockHash hash) {
  auto it = map_.find(hash);
  const std::uint32_t n = it->second.node;
  Unlink(n);
  map_.erase(it);
  free_.push_back(n);
}

void KvIndex::ClearOwner(Entry& entry, WorkerMask bit) {
  for (int t = 0; t < kNumTiers; ++t) {
    if (entry.owners[t] & bit) {
      entry.owners[t] &= ~bit;
      --workers_[std::countr_zero(bit)].blocks[t];
    }
  }
}

void KvIndex::ClearWorker(WorkerSlot w) {
  const WorkerMask bit = SlotBit(w);
  // Walks the LRU list (live nodes only); snapshots and restarts are rare next to decisions.
  std::uint32_t n = head_;
  while (n != kNil) {
    const std::uint32_t next = nodes_[n].next;
    const BlockHash hash = nodes_[n].hash;
    Entry& entry = map_.find(hash)->second;
    ClearOwner(entry, bit);
    if (entry.empty()) Erase(hash);
    n = next;
  }
  workers_[w].blocks = {};
}

void KvIndex::Prune() {
  while (map_.size() > options_.max_blocks && tail_ != kNil) {
    const BlockHash hash = nodes_[tail_].hash;
    Entry& entry = map_.find(hash)->second;
    ForEachSlot(entry.owners[0] | entry.owners[1] | entry.owners[2],
                [this, &entry](int w) { ClearOwner(entry, SlotBit(w)); });
    Erase(hash);
  }
}

}  // namespace tandem::routing
