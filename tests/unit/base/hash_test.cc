#include "tandem/base/hash.h"

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(ChainedBlockHash, IsStableAcrossProcessesAndBuilds) {
  // Pinned values: a change here silently breaks prefix matching between a new router and old
  // workers (or a warm disk tier), so it must be deliberate. Computed by a separate Python
  // implementation of the scheme described in StableHash64.MatchesAnIndependentImplementationOfTheScheme
  // below (seed = parent + 0x9e3779b97f4a7c15, tokens as little-endian int32 bytes).
  const std::vector<std::int32_t> tokens = {1, 2, 3, 4};
  const std::uint64_t first = ChainedBlockHash(0, tokens);
  EXPECT_EQ(first, 0x6c5e35d36b10a3ddULL);
  EXPECT_EQ(ChainedBlockHash(first, tokens), 0x44a06ce9ca50351cULL);
  // Two 16-token blocks (the default block size) and ids of large vocabularies (past 2^16).
  std::vector<std::int32_t> prompt(32);
  for (int i = 0; i < 32; ++i) prompt[i] = 100 + i;
  EXPECT_EQ(ChainedBlockHashes(prompt, 16),
            (std::vector<std::uint64_t>{0xd7221fe345fe56b7ULL, 0xdae31b3518ade09cULL}));
  const std::vector<std::int32_t> large = {128000, 151643, 1 << 18, 3};
  EXPECT_EQ(ChainedBlockHash(0, large), 0xe3c714a5c755f4a2ULL);
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

// The definition ChainedBlockHash had before it streamed its bytes: StableHash64 over a buffer of
// the tokens' little-endian bytes, seeded with the parent. Kept as the reference the streamed
// version must equal bit for bit (workers, engine and router share these hashes).
std::uint64_t BufferedChainedBlockHash(std::uint64_t parent, std::span<const std::int32_t> tokens) {
  std::vector<std::uint8_t> buf;
  for (std::int32_t t : tokens) {
    const auto u = static_cast<std::uint32_t>(t);
    for (int shift = 0; shift < 32; shift += 8) buf.push_back(static_cast<std::uint8_t>(u >> shift));
  }
  return StableHash64(buf, parent + 0x9e3779b97f4a7c15ULL);
}

TEST(ChainedBlockHash, EqualsTheBufferedDefinitionOnRandomInputs) {
  std::mt19937_64 rng(20261130);
  std::uniform_int_distribution<std::size_t> length(0, 70);
  std::uniform_int_distribution<std::int32_t> any_token(std::numeric_limits<std::int32_t>::min(),
                                                        std::numeric_limits<std::int32_t>::max());
  // Token ids of a small vocabulary, of a large one (up to 2^18, past 2^16), any int32, and a mix
  // of the three: the streamed version takes shortcuts over zero high bytes.
  std::uniform_int_distribution<std::int32_t> small_token(0, 300);
  std::uniform_int_distribution<std::int32_t> large_vocab_token(0, 1 << 18);
  for (int trial = 0; trial < 4000; ++trial) {
    const std::uint64_t parent = trial % 3 == 0 ? 0 : rng();
    std::vector<std::int32_t> tokens(length(rng));
    for (auto& t : tokens) {
      const int kind = trial % 4 == 3 ? static_cast<int>(rng() % 3) : trial % 4;  // 3: a mix
      t = kind == 0 ? any_token(rng) : kind == 1 ? small_token(rng) : large_vocab_token(rng);
    }
    ASSERT_EQ(ChainedBlockHash(parent, tokens), BufferedChainedBlockHash(parent, tokens))
        << "trial " << trial << ", " << tokens.size() << " tokens, parent " << parent;
  }
}

TEST(StableHash64, MatchesAnIndependentImplementationOfTheScheme) {
  // From a separate Python implementation of FNV-1a-64 (offset 0xcbf29ce484222325, prime
  // 0x100000001b3) started from offset ^ SplitMix64(seed) and finished with SplitMix64(h ^ length),
  // written from that description, not from this code.
  const std::string text = "tandem";
  const std::vector<std::uint8_t> bytes(text.begin(), text.end());
  EXPECT_EQ(StableHash64(bytes, 0), 0xd234fde83a3afea4ULL);
  EXPECT_EQ(StableHash64({}, 7), 0xbe7e6d3fcecf3b31ULL);
  const std::vector<std::int32_t> first = {1, 2, 3, 4};
  const std::vector<std::int32_t> second = {-1, 0x7fffffff, 65536, 7};
  const std::uint64_t h0 = ChainedBlockHash(0, first);
  EXPECT_EQ(h0, 0x6c5e35d36b10a3ddULL);
  EXPECT_EQ(ChainedBlockHash(h0, second), 0x3e58eecb99298a6bULL);
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

TEST(ChainedBlockHashesInto, WritesTheSameChainIntoACallerBuffer) {
  const std::vector<std::int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const std::vector<std::uint64_t> chain = ChainedBlockHashes(tokens, 3, 42);
  ASSERT_EQ(chain.size(), 3u);
  std::uint64_t out[5] = {0, 0, 0, 0, 0};
  EXPECT_EQ(ChainedBlockHashesInto(tokens, 3, 42, out), 3u);
  EXPECT_EQ(std::vector<std::uint64_t>(out, out + 3), chain);
  EXPECT_EQ(out[3], 0u);  // nothing past the full blocks
  // A short buffer takes the chain's beginning.
  std::uint64_t two[2] = {0, 0};
  EXPECT_EQ(ChainedBlockHashesInto(tokens, 3, 42, two), 2u);
  EXPECT_EQ(two[1], chain[1]);
  EXPECT_EQ(ChainedBlockHashesInto(tokens, 0, 42, out), 0u);
}

}  // namespace tandem
