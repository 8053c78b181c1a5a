#pragma once

#include <vector>

#include "gtest/gtest.h"
#include "tandem/routing/kv_index.h"
#include "tandem/routing/policy.h"
#include "tandem/routing/worker_state.h"

namespace tandem::routing::testing {

// A hand-built cluster: prefill workers on slots [0, prefill), decode workers after them.
class ClusterFixture : public ::testing::Test {
 protected:
  void Build(int prefill, int decode) {
    for (int p = 0; p < prefill; ++p) {
      ASSERT_TRUE(table_.Add(p, Role::kPrefill).ok());
      ASSERT_TRUE(index_.AddWorker(p, 1).ok());
    }
    for (int d = 0; d < decode; ++d) ASSERT_TRUE(table_.Add(prefill + d, Role::kDecode).ok());
  }

  // Worker w caches `chain` on device (through the event path, with its next seq).
  void Cache(WorkerSlot w, const std::vector<BlockHash>& chain, Tier tier = Tier::kDevice) {
    Publish(w, KvEvent::Kind::kStored, chain, tier);
  }

  // Worker w evicts `chain` from `tier`.
  void Evict(WorkerSlot w, const std::vector<BlockHash>& chain, Tier tier = Tier::kDevice) {
    Publish(w, KvEvent::Kind::kRemoved, chain, tier);
  }

  void Publish(WorkerSlot w, KvEvent::Kind kind, const std::vector<BlockHash>& chain, Tier tier) {
    KvEvent e;
    e.seq = index_.last_seq(w) + 1;
    e.kind = kind;
    e.tier = tier;
    e.block_hashes = chain;
    ASSERT_EQ(*index_.Apply(w, e), EventOutcome::kApplied);
  }

  // `n` requests of `tokens` uncached tokens each queued on prefill worker w.
  void QueuePrefill(WorkerSlot w, int n, std::int64_t tokens = 1000) {
    for (int i = 0; i < n; ++i) table_.OnPrefillDispatched(w, tokens, tokens / 16 + 1);
  }

  RouteRequest Request(const std::vector<BlockHash>& chain, int block_size = 16) {
    chain_ = chain;
    return RouteRequest{.block_hashes = chain_,
                        .prompt_tokens = static_cast<std::int64_t>(chain.size()) * block_size,
                        .block_size = block_size};
  }

  ClusterView View() const { return ClusterView{.index = &index_, .workers = table_.states()}; }

  RouteDecision Route(Policy& policy, const RouteRequest& request) {
    absl::StatusOr<RouteDecision> d = policy.Route(request, View());
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *d : RouteDecision{};
  }

  static std::vector<BlockHash> Chain(BlockHash first, int n) {
    std::vector<BlockHash> chain;
    for (int i = 0; i < n; ++i) chain.push_back(first + i);
    return chain;
  }

  WorkerTable table_;
  KvIndex index_{KvIndex::Options{.max_blocks = 1 << 16}};
  std::vector<BlockHash> chain_;
};

}  // namespace tandem::routing::testing
