#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "tandem/routing/types.h"

namespace tandem::sim {

// A simulated worker's KV cache: blocks by chained hash, evicted least recently used first.
class BlockLru {
 public:
  explicit BlockLru(std::int64_t capacity) : capacity_(capacity) {}

  // Leading blocks of `chain` present.
  std::int64_t LeadingRun(std::span<const routing::BlockHash> chain) const {
    std::int64_t run = 0;
    while (run < static_cast<std::int64_t>(chain.size()) && where_.contains(chain[run])) ++run;
    return run;
  }

  // Makes all of `chain` most recent, roots last so they are evicted last (a prefix without its
  // root is useless; engines free a sequence's blocks tail first for the same reason). What made
  // room is appended to `evicted`.
  void Use(std::span<const routing::BlockHash> chain, std::vector<routing::BlockHash>* evicted) {
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      auto found = where_.find(*it);
      if (found != where_.end()) {
        order_.splice(order_.begin(), order_, found->second);
      } else {
        order_.push_front(*it);
        where_[*it] = order_.begin();
      }
    }
    while (static_cast<std::int64_t>(order_.size()) > capacity_) {
      evicted->push_back(order_.back());
      where_.erase(order_.back());
      order_.pop_back();
    }
  }

  bool Contains(routing::BlockHash h) const { return where_.contains(h); }
  std::int64_t size() const { return static_cast<std::int64_t>(order_.size()); }
  std::int64_t capacity() const { return capacity_; }

 private:
  std::int64_t capacity_;
  std::list<routing::BlockHash> order_;  // front = most recent
  absl::flat_hash_map<routing::BlockHash, std::list<routing::BlockHash>::iterator> where_;
};

}  // namespace tandem::sim
