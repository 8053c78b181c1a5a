// A salted KV chain (SamplingParams::kv_hash_root, BlockTable::root): blocks registered under one
// root are found under that root only, and the hashes published are the salted chain.
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "tandem/base/hash.h"
#include "tandem/engine/block_manager.h"
#include "tandem/kernels/backend.h"

namespace tandem::engine {
namespace {

std::vector<std::int32_t> Tokens(int n) {
  std::vector<std::int32_t> t(n);
  std::iota(t.begin(), t.end(), 100);
  return t;
}

TEST(KvSaltTest, BlocksAreSharedOnlyUnderTheSameRoot) {
  auto backend = kernels::CreateCpuBackend({1});
  auto bm = BlockManager::Create({4, 16, true}, {2, 3}, backend.get());
  ASSERT_TRUE(bm.ok()) << bm.status();
  std::vector<KvCacheEvent> events;
  (*bm)->SetEventListener([&](const KvCacheEvent& e) { events.push_back(e); });
  const std::vector<std::int32_t> prompt = Tokens(13);  // 3 full blocks reusable
  constexpr std::uint64_t kTenantA = 0xa11ce, kTenantB = 0xb0b;

  BlockTable a;
  a.root = kTenantA;
  ASSERT_TRUE((*bm)->EnsureCapacity(&a, 13).ok());
  (*bm)->CommitComputedBlocks(prompt, 12, &a);
  ASSERT_EQ(a.hashes.size(), 3u);
  // What the router computes for the same tokens and root: the hashes the worker published.
  EXPECT_EQ(a.hashes, ChainedBlockHashes(std::span(prompt).first(12), 4, kTenantA));
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].block_hash, a.hashes[0]);
  EXPECT_EQ(events[0].parent_hash, kTenantA);

  EXPECT_EQ((*bm)->FindCachedPrefix(prompt, kTenantA).blocks.size(), 3u) << "the same tenant hits";
  EXPECT_TRUE((*bm)->FindCachedPrefix(prompt, kTenantB).blocks.empty()) << "another tenant misses";
  EXPECT_TRUE((*bm)->FindCachedPrefix(prompt, 0).blocks.empty()) << "unsalted misses";
  EXPECT_TRUE((*bm)->FindCachedPrefix(prompt).blocks.empty());

  // Unsalted blocks are not found by a salted request either.
  (*bm)->Release(&a);
  BlockTable shared;
  ASSERT_TRUE((*bm)->EnsureCapacity(&shared, 13).ok());
  (*bm)->CommitComputedBlocks(prompt, 12, &shared);
  EXPECT_EQ((*bm)->FindCachedPrefix(prompt, 0).blocks.size(), 3u);
  EXPECT_EQ((*bm)->FindCachedPrefix(prompt, kTenantB).blocks.size(), 0u);
}

}  // namespace
}  // namespace tandem::engine
