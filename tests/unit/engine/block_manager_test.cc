#include "tandem/engine/block_manager.h"

#include <numeric>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tandem/base/hash.h"
#include "tandem/kernels/backend.h"

namespace tandem::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class BlockManagerTest : public ::testing::Test {
 protected:
  std::unique_ptr<BlockManager> Make(int num_blocks, int block_size = 4, bool caching = true) {
    BlockManagerConfig config{block_size, num_blocks, caching};
    auto bm = BlockManager::Create(config, {2, 3}, backend_.get());
    EXPECT_TRUE(bm.ok()) << bm.status();
    (*bm)->SetEventListener([this](const KvCacheEvent& e) { events_.push_back(e); });
    return std::move(*bm);
  }
  static std::vector<std::int32_t> Tokens(int n, int first = 100) {
    std::vector<std::int32_t> t(n);
    std::iota(t.begin(), t.end(), first);
    return t;
  }

  std::unique_ptr<kernels::Backend> backend_ = kernels::CreateCpuBackend({1});
  std::vector<KvCacheEvent> events_;
};

TEST_F(BlockManagerTest, PoolLayoutMatchesKvStorage) {
  auto bm = Make(5, 4);
  const model::KvStorage& s = bm->storage();
  ASSERT_NE(s.base, nullptr);
  EXPECT_EQ(s.num_blocks, 5);
  EXPECT_EQ(s.block_floats(), 4 * 2 * 3);
  // The whole pool is writable (the sanitizer build would flag an undersized allocation).
  std::fill(s.base, s.base + s.block_floats() * s.num_blocks, 1.0f);
}

TEST_F(BlockManagerTest, RejectsBadConfig) {
  EXPECT_FALSE(BlockManager::Create({0, 4, true}, {2, 3}, backend_.get()).ok());
  EXPECT_FALSE(BlockManager::Create({4, 0, true}, {2, 3}, backend_.get()).ok());
  EXPECT_FALSE(BlockManager::Create({4, 4, true}, {0, 3}, backend_.get()).ok());
}

TEST_F(BlockManagerTest, EnsureCapacityIsAllOrNothing) {
  auto bm = Make(3, 4);
  BlockTable a;
  ASSERT_TRUE(bm->EnsureCapacity(&a, 5).ok());  // 2 blocks
  EXPECT_EQ(a.blocks.size(), 2u);
  EXPECT_EQ(bm->num_free_blocks(), 1);
  BlockTable b;
  EXPECT_EQ(bm->EnsureCapacity(&b, 9).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(b.blocks, IsEmpty());
  EXPECT_EQ(bm->num_free_blocks(), 1);
  ASSERT_TRUE(bm->EnsureCapacity(&a, 8).ok());  // still 2 blocks
  EXPECT_EQ(bm->num_free_blocks(), 1);
  bm->Release(&a);
  EXPECT_THAT(a.blocks, IsEmpty());
  EXPECT_EQ(bm->num_free_blocks(), 3);
}

TEST_F(BlockManagerTest, CommittedFullBlocksAreReusedByChainedHash) {
  auto bm = Make(8, 4);
  const auto tokens = Tokens(10);  // 2 full blocks + 2 tokens
  BlockTable a;
  ASSERT_TRUE(bm->EnsureCapacity(&a, 10).ok());
  bm->CommitComputedBlocks(tokens, 10, &a);
  const std::uint64_t h0 = ChainedBlockHash(0, std::span(tokens).subspan(0, 4));
  const std::uint64_t h1 = ChainedBlockHash(h0, std::span(tokens).subspan(4, 4));
  EXPECT_THAT(a.hashes, ElementsAre(h0, h1));
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(events_[0].kind, KvCacheEvent::Kind::kStored);
  EXPECT_EQ(events_[0].block_hash, h0);
  EXPECT_EQ(events_[0].parent_hash, 0u);
  EXPECT_EQ(events_[1].block_hash, h1);
  EXPECT_EQ(events_[1].parent_hash, h0);
  EXPECT_EQ(events_[1].block_id, a.blocks[1]);

  // While `a` is alive its blocks are shared, not free.
  auto match = bm->FindCachedPrefix(tokens);
  EXPECT_THAT(match.blocks, ElementsAre(a.blocks[0], a.blocks[1]));
  EXPECT_EQ(match.num_evictable, 0);
  BlockTable b;
  EXPECT_EQ(bm->AcquirePrefix(match, &b), 8);
  const int free_before = bm->num_free_blocks();
  bm->Release(&a);
  EXPECT_EQ(bm->num_free_blocks(), free_before + 1);  // only a's private tail block
  bm->Release(&b);
  EXPECT_EQ(bm->num_free_blocks(), 8);
  EXPECT_EQ(bm->num_cached_blocks(), 2);  // still cached, now evictable
  EXPECT_EQ(bm->FindCachedPrefix(tokens).num_evictable, 2);
}

TEST_F(BlockManagerTest, NeverReusesTheBlockHoldingTheLastToken) {
  auto bm = Make(8, 4);
  const auto tokens = Tokens(8);  // exactly 2 full blocks
  BlockTable a;
  ASSERT_TRUE(bm->EnsureCapacity(&a, 8).ok());
  bm->CommitComputedBlocks(tokens, 8, &a);
  EXPECT_EQ(bm->FindCachedPrefix(tokens).blocks.size(), 1u);
  EXPECT_EQ(bm->FindCachedPrefix(Tokens(9)).blocks.size(), 2u);
}

TEST_F(BlockManagerTest, DifferentPrefixSameBlockContentDoesNotMatch) {
  auto bm = Make(8, 4);
  std::vector<std::int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  BlockTable a;
  ASSERT_TRUE(bm->EnsureCapacity(&a, 9).ok());
  bm->CommitComputedBlocks(tokens, 9, &a);
  std::vector<std::int32_t> other = {0, 2, 3, 4, 5, 6, 7, 8, 9};  // same second block
  EXPECT_THAT(bm->FindCachedPrefix(other).blocks, IsEmpty());
}

TEST_F(BlockManagerTest, OnlyComputedBlocksAreCommitted) {
  auto bm = Make(8, 4);
  const auto tokens = Tokens(12);
  BlockTable a;
  ASSERT_TRUE(bm->EnsureCapacity(&a, 12).ok());
  bm->CommitComputedBlocks(tokens, 7, &a);  // block 1 only partly written
  EXPECT_EQ(a.hashes.size(), 1u);
  EXPECT_EQ(bm->FindCachedPrefix(tokens).blocks.size(), 1u);
}

TEST_F(BlockManagerTest, EvictsLeastRecentlyFreedAndTailFirst) {
  auto bm = Make(4, 2);
  const std::vector<std::int32_t> x = {1, 2, 3, 4, 5};
  const std::vector<std::int32_t> y = {9, 8};
  const std::vector<std::int32_t> y_longer = {9, 8, 7};
  BlockTable a, b;
  ASSERT_TRUE(bm->EnsureCapacity(&a, 5).ok());  // 3 blocks, 2 full
  bm->CommitComputedBlocks(x, 5, &a);
  ASSERT_TRUE(bm->EnsureCapacity(&b, 2).ok());  // 1 block left, takes it
  bm->CommitComputedBlocks(y, 2, &b);
  const std::int32_t x_first = a.blocks[0], x_second = a.blocks[1], y_first = b.blocks[0];
  bm->Release(&a);  // x's tail (second block) is least recently used
  bm->Release(&b);
  EXPECT_EQ(bm->FindCachedPrefix(y_longer).blocks.size(), 1u);
  events_.clear();

  BlockTable c;
  ASSERT_TRUE(bm->EnsureCapacity(&c, 2).ok());  // takes the one never-hashed free block
  EXPECT_THAT(events_, IsEmpty());
  ASSERT_TRUE(bm->EnsureCapacity(&c, 4).ok());
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].kind, KvCacheEvent::Kind::kEvicted);
  EXPECT_EQ(events_[0].block_id, x_second);
  EXPECT_EQ(bm->FindCachedPrefix(x).blocks, std::vector<std::int32_t>{x_first});
  ASSERT_TRUE(bm->EnsureCapacity(&c, 6).ok());
  EXPECT_EQ(events_.back().block_id, x_first);
  ASSERT_TRUE(bm->EnsureCapacity(&c, 8).ok());
  EXPECT_EQ(events_.back().block_id, y_first);
  EXPECT_THAT(bm->FindCachedPrefix(y_longer).blocks, IsEmpty());
  EXPECT_EQ(bm->num_cached_blocks(), 0);
}

TEST_F(BlockManagerTest, ReacquiringAnEvictableBlockProtectsItFromEviction) {
  auto bm = Make(2, 2);
  const std::vector<std::int32_t> x = {1, 2, 3};
  BlockTable a;
  ASSERT_TRUE(bm->EnsureCapacity(&a, 3).ok());
  bm->CommitComputedBlocks(x, 3, &a);
  bm->Release(&a);
  BlockTable b;
  auto match = bm->FindCachedPrefix(x);
  ASSERT_EQ(match.blocks.size(), 1u);
  bm->AcquirePrefix(match, &b);
  EXPECT_EQ(bm->num_free_blocks(), 1);
  BlockTable c;
  EXPECT_FALSE(bm->EnsureCapacity(&c, 3).ok());
  ASSERT_TRUE(bm->EnsureCapacity(&c, 2).ok());
  EXPECT_NE(c.blocks[0], b.blocks[0]);
}

TEST_F(BlockManagerTest, DisabledPrefixCachingNeverMatches) {
  auto bm = Make(8, 4, /*caching=*/false);
  const auto tokens = Tokens(10);
  BlockTable a;
  ASSERT_TRUE(bm->EnsureCapacity(&a, 10).ok());
  bm->CommitComputedBlocks(tokens, 10, &a);
  EXPECT_THAT(bm->FindCachedPrefix(tokens).blocks, IsEmpty());
  EXPECT_THAT(events_, IsEmpty());
}

TEST_F(BlockManagerTest, DuplicateContentKeepsFirstCachedCopy) {
  auto bm = Make(8, 4);
  const auto tokens = Tokens(6);
  BlockTable a, b;
  ASSERT_TRUE(bm->EnsureCapacity(&a, 6).ok());
  ASSERT_TRUE(bm->EnsureCapacity(&b, 6).ok());
  bm->CommitComputedBlocks(tokens, 6, &a);
  bm->CommitComputedBlocks(tokens, 6, &b);  // computed concurrently, same content
  EXPECT_EQ(events_.size(), 1u);
  EXPECT_EQ(bm->FindCachedPrefix(tokens).blocks, std::vector<std::int32_t>{a.blocks[0]});
  bm->Release(&b);
  bm->Release(&a);
  EXPECT_EQ(bm->num_free_blocks(), 8);
  EXPECT_EQ(bm->num_cached_blocks(), 1);
}

}  // namespace
}  // namespace tandem::engine
