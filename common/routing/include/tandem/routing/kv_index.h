#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "tandem/routing/kv_event.h"
#include "tandem/routing/types.h"

namespace tandem::routing {

// Blocks of one worker's leading cached run, by the best tier each block is held in.
struct WorkerOverlap {
  int device = 0;
  int host = 0;
  int disk = 0;
  int blocks() const { return device + host + disk; }
  double Credit(const TierCredits& credits) const {
    return device * credits.device + host * credits.host + disk * credits.disk;
  }
};

struct MatchResult {
  std::array<WorkerOverlap, kMaxWorkers> workers{};
  WorkerOverlap& operator[](WorkerSlot w) { return workers[w]; }
  const WorkerOverlap& operator[](WorkerSlot w) const { return workers[w]; }
};

// Global prefix index: which worker holds which block in which tier, fed by the workers' KV events.
//
// Hashes are chained, so a flat hash -> owners map answers prefix queries: a worker's overlap with a
// request is the leading run of the request's chain it holds. Memory is bounded by max_blocks:
// beyond it the least recently stored or touched blocks are forgotten (a forgotten block only costs
// a missed affinity, never a wrong answer about correctness). Touch and Store make a chain recent
// leaves first: a prefix's roots stay at least as recent as its leaves, so pruning takes leaves first.
//
// Not thread-safe: the router serialises ingest and decisions (one mutex, microseconds each).
//
//   KvIndex index({.max_blocks = 1 << 20});
//   index.AddWorker(3, incarnation);
//   auto outcome = index.Apply(3, event);          // kGap -> ask worker 3 for a snapshot
//   MatchResult m; index.Match(chain, ~WorkerMask{0}, &m);  // m[3].device = cached blocks
class KvIndex {
 public:
  struct Options {
    // Reserved up front, about 100 bytes per block (1M blocks: ~100 MB), so that no decision ever
    // waits on a rehash.
    std::size_t max_blocks = std::size_t{1} << 20;
  };
  explicit KvIndex(Options options);

  // A new incarnation forgets what the previous one held; the same incarnation is a no-op.
  absl::Status AddWorker(WorkerSlot w, std::uint64_t incarnation);
  absl::Status RemoveWorker(WorkerSlot w);

  // InvalidArgument for an unknown worker or an out-of-range tier.
  absl::StatusOr<EventOutcome> Apply(WorkerSlot w, const KvEvent& event);
  // A heartbeat's last_kv_event_seq: a value beyond what was applied means events were lost.
  absl::StatusOr<EventOutcome> ObserveSeq(WorkerSlot w, std::uint64_t last_seq);
  bool IsStale(WorkerSlot w) const;
  std::uint64_t last_seq(WorkerSlot w) const;

  // Per-worker leading-run overlap of `chain` among `candidates` (stale workers count as 0).
  void Match(std::span<const BlockHash> chain, WorkerMask candidates, MatchResult* out) const;
  // Marks the known leading part of `chain` as recently used (call after routing a request).
  void Touch(std::span<const BlockHash> chain);

  // Direct updates without sequence numbers: for approximate trees fed by routing decisions.
  void Store(WorkerSlot w, Tier tier, std::span<const BlockHash> hashes);
  void Remove(WorkerSlot w, Tier tier, std::span<const BlockHash> hashes);

  std::size_t size() const { return map_.size(); }
  std::size_t max_blocks() const { return options_.max_blocks; }
  // Blocks the index believes worker w holds in `tier`.
  std::int64_t blocks_on(WorkerSlot w, Tier tier) const;
  // Blocks removed events took off w that it then held in no tier, counted since w was added
  // (callers take differences; a count that went down means the worker was removed and re-added).
  std::int64_t evicted_blocks(WorkerSlot w) const;
  WorkerMask known_workers() const { return known_; }

 private:
  static constexpr std::uint32_t kNil = 0xffffffffu;
  // Owners live in the map's slot, so a lookup reads one cache line; the LRU links live apart.
  struct Entry {
    std::uint32_t node = kNil;
    std::array<WorkerMask, kNumTiers> owners{};
    bool empty() const { return (owners[0] | owners[1] | owners[2]) == 0; }
  };
  struct Node {
    BlockHash hash = 0;
    std::uint32_t prev = kNil;
    std::uint32_t next = kNil;
  };
  struct WorkerInfo {
    std::uint64_t incarnation = 0;
    std::uint64_t last_seq = 0;
    bool stale = false;
    std::array<std::int64_t, kNumTiers> blocks{};
    std::int64_t evicted = 0;
  };

  absl::Status CheckWorker(WorkerSlot w) const;
  Entry& FindOrCreate(BlockHash hash);
  void Unlink(std::uint32_t n);
  void PushFront(std::uint32_t n);
  void Erase(BlockHash hash);
  void ClearOwner(Entry& entry, WorkerMask bit);
  void ClearWorker(WorkerSlot w);
  void Prune();

  Options options_;
  absl::flat_hash_map<BlockHash, Entry> map_;
  std::vector<std::uint32_t> touch_scratch_;
  std::vector<Node> nodes_;
  std::vector<std::uint32_t> free_;
  std::uint32_t head_ = kNil;  // most recent
  std::uint32_t tail_ = kNil;  // least recent
  std::array<WorkerInfo, kMaxWorkers> workers_{};
  WorkerMask known_ = 0;
  WorkerMask stale_ = 0;
};

}  // namespace tandem::routing
