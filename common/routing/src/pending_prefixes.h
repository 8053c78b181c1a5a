#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "absl/container/flat_hash_map.h"
#include "tandem/routing/types.h"

namespace tandem::routing::internal {

// Blocks routed to a worker and not yet computed there. The KV index learns a prefill's blocks
// only when the worker stores them, seconds after the routing decision under load; a burst of
// requests sharing a new prefix (an agent's next steps, a new tenant, a popular document) would
// each find it nowhere and compute it on different workers. Remembering where each one went
// until it is predicted to be stored lets the next ones follow it, as SGLang's approximate tree
// does for everything it routes (here only the part the index does not know yet).
//
// A block's entry holds the workers it is pending on and when the latest of them is predicted to
// have stored it; past that the index answers. Bounded: cleared when full. Not thread-safe.
class PendingPrefixes {
 public:
  PendingPrefixes(std::size_t max_blocks, int max_blocks_per_request)
      : max_blocks_(max_blocks), max_per_request_(max_blocks_per_request) {}

  // `chain[from..]` (at most max_blocks_per_request of them) will be on `w` by `until`.
  void Add(std::span<const BlockHash> chain, std::size_t from, WorkerSlot w, double now,
           double until) {
    const std::size_t end = std::min(chain.size(), from + static_cast<std::size_t>(max_per_request_));
    if (from >= end) return;
    if (blocks_.size() + (end - from) > max_blocks_) blocks_.clear();  // cheap bound
    for (std::size_t i = from; i < end; ++i) {
      Entry& e = blocks_[chain[i]];
      if (e.until < now) e.workers = 0;  // what was pending there is stored or lost by now
      e.workers |= SlotBit(w);
      e.until = std::max(e.until, until);
    }
  }

  // How far `chain` runs from `from` through blocks pending on `w` at `now`.
  std::size_t Extend(std::span<const BlockHash> chain, std::size_t from, WorkerSlot w,
                     double now) const {
    std::size_t i = from;
    while (i < chain.size()) {
      auto it = blocks_.find(chain[i]);
      if (it == blocks_.end() || it->second.until < now || (it->second.workers & SlotBit(w)) == 0) {
        break;
      }
      ++i;
    }
    return i;
  }

 private:
  struct Entry {
    WorkerMask workers = 0;
    double until = 0;
  };
  std::size_t max_blocks_;
  int max_per_request_;
  absl::flat_hash_map<BlockHash, Entry> blocks_;
};

}  // namespace tandem::routing::internal
