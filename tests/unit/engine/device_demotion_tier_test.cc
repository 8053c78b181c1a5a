// Device-tier watermark demotion: above the low watermark, cold cached device blocks are copied
// to host memory between steps at the configured rate (fake clock), their later eviction copies
// nothing, and a request served from those host copies decodes exactly as without any caching.

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "fake_model.h"
#include "gtest/gtest.h"
#include "reference_decode.h"
#include "tandem/engine/engine.h"
#include "tandem/kv/clock.h"
#include "tandem/kv/tiered_kv_store.h"

namespace tandem::engine {
namespace {


constexpr int kBlockSize = 4;
constexpr int kPoolBlocks = 12;
// FakeModel: 2 layers x 4 floats per token.
constexpr std::uint64_t kBlockBytes =
    kBlockSize * 2 * testing::FakeModel::kFloatsPerToken * sizeof(float);
// One block at once, two per second: with 250 ms steps, at most one block every other step.
constexpr std::uint64_t kRateBytesPerS = 2 * kBlockBytes;
constexpr std::uint64_t kBurstBytes = kBlockBytes;
constexpr std::int64_t kStepMs = 250;
constexpr std::int64_t kStartMs = 1'800'000'000'000;

// Distinct prompts per seed over the fake vocabulary [3, 64).
std::vector<std::int32_t> Prompt(int seed, int len) {
  std::minstd_rand next(static_cast<std::uint32_t>(seed));
  std::vector<std::int32_t> tokens;
  tokens.reserve(len);
  while (static_cast<int>(tokens.size()) < len) tokens.push_back(3 + next() % 61);
  return tokens;
}

// 23 prompt tokens + 2 generated: 24 tokens of KV, six full blocks, all cached afterwards.
testing::Request SixBlockRequest(const std::string& id, int seed) {
  return {id, Prompt(seed, 23), testing::Greedy(2)};
}

class DeviceDemotionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kv::TieredKvStoreOptions o;
    o.host_capacity_bytes = 64 * kBlockBytes;
    o.clock = &clock_;
    o.background_thread = false;
    auto s = kv::TieredKvStore::Open(o);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
    EngineConfig c;
    c.block_size = kBlockSize;
    c.num_blocks = kPoolBlocks;
    c.max_batch_tokens = 256;
    c.lower_tiers = store_.get();
    c.device_low_watermark = 0.8;
    c.device_demotion_rate_bytes_per_s = kRateBytesPerS;
    c.device_demotion_burst_bytes = kBurstBytes;
    c.clock = &clock_;
    auto e = Engine::Create(&model_, backend_.get(), c);
    ASSERT_TRUE(e.ok()) << e.status();
    engine_ = std::move(*e);
  }

  // One Step() kStepMs after the previous one; records the demotion count and time after it.
  void StepOnce() {
    clock_.Advance(kStepMs);
    auto outs = engine_->Step();
    ASSERT_TRUE(outs.ok()) << outs.status();
    for (const StepOutput& o : *outs) {
      ASSERT_NE(o.finish_reason, FinishReason::kError) << o.error;
      Completion& c = done_[o.request_id];
      c.tokens.insert(c.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      c.cached_tokens = o.cached_tokens;
    }
    demoted_.push_back(engine_->kv_tier_stats().demoted_blocks);
    times_.push_back(clock_.NowUnixMs());
  }
  void Run(const testing::Request& r) {
    ASSERT_TRUE(engine_->AddRequest(r.id, r.prompt, r.params).ok());
    for (int guard = 0; engine_->HasPendingWork(); ++guard) {
      ASSERT_LT(guard, 1000) << "engine made no progress";
      StepOnce();
    }
    testing::FakeModel fresh;
    auto want = testing::ReferenceDecode(fresh, r.prompt, r.params, r.id);
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_EQ(done_[r.id].tokens, *want) << r.id;
  }
  // Over every window of recorded steps (i, j], the bytes demoted stay within the token bucket's
  // bound, counted from the engine's creation (a full bucket) for windows starting there.
  void ExpectPacedDemotion() const {
    for (std::size_t i = 0; i <= demoted_.size(); ++i) {
      const std::int64_t from_blocks = i == 0 ? 0 : demoted_[i - 1];
      const std::int64_t from_ms = i == 0 ? kStartMs : times_[i - 1];
      for (std::size_t j = i; j < demoted_.size(); ++j) {
        const double bytes = static_cast<double>((demoted_[j] - from_blocks) * kBlockBytes);
        const double bound = kBurstBytes + kRateBytesPerS * (times_[j] - from_ms) / 1000.0;
        EXPECT_LE(bytes, bound) << "steps (" << i << ", " << j << "]";
      }
    }
  }

  struct Completion {
    std::vector<std::int32_t> tokens;
    int cached_tokens = 0;
  };
  kv::FakeClock clock_{kStartMs};
  testing::FakeModel model_;
  std::unique_ptr<kernels::Backend> backend_ = kernels::CreateCpuBackend({1});
  std::unique_ptr<kv::TieredKvStore> store_;
  std::unique_ptr<Engine> engine_;
  std::map<std::string, Completion> done_;
  std::vector<std::int64_t> demoted_;  // cumulative, after each step
  std::vector<std::int64_t> times_;
};

TEST_F(DeviceDemotionTest, DemotesColdBlocksAtTheConfiguredRateOnlyAboveTheWatermark) {
  const testing::Request low = SixBlockRequest("low", 1);
  Run(low);
  ASSERT_EQ(engine_->block_manager().num_cached_blocks(), 6);
  // Half the pool holds KV: below the watermark, however long the engine idles.
  for (int i = 0; i < 10; ++i) StepOnce();
  EXPECT_EQ(engine_->kv_tier_stats().demoted_blocks, 0);
  EXPECT_EQ(store_->Stats().host.blocks, 0u);

  Run(SixBlockRequest("fill", 2));  // the whole pool now holds KV (12 cached blocks)
  ASSERT_EQ(engine_->block_manager().num_cached_blocks(), kPoolBlocks);
  for (int i = 0; i < 60 && engine_->kv_tier_stats().demoted_blocks < kPoolBlocks; ++i) {
    StepOnce();
  }
  EXPECT_EQ(engine_->kv_tier_stats().demoted_blocks, kPoolBlocks);
  EXPECT_EQ(store_->Stats().host.blocks, static_cast<std::uint64_t>(kPoolBlocks));
  ExpectPacedDemotion();
  // Spread out: the burst allows one block, so twelve blocks took at least twelve steps.
  int steps_with_demotions = 0;
  for (std::size_t i = 0; i < demoted_.size(); ++i) {
    const std::int64_t before = i == 0 ? 0 : demoted_[i - 1];
    EXPECT_LE(demoted_[i] - before, 1) << "step " << i;
    steps_with_demotions += demoted_[i] > before ? 1 : 0;
  }
  EXPECT_EQ(steps_with_demotions, kPoolBlocks);
  EXPECT_EQ(engine_->kv_tier_stats().spilled_blocks, 0) << "nothing was evicted yet";

  // A new prompt takes six blocks: it evicts low's (the coldest), all demoted: no copy again.
  Run(SixBlockRequest("evict", 3));
  KvTierStats s = engine_->kv_tier_stats();
  EXPECT_EQ(s.evicted_demoted_blocks, 6);
  EXPECT_EQ(s.spilled_blocks, 0);
  EXPECT_EQ(s.spill_dropped_blocks, 0);
  ExpectPacedDemotion();

  // low's prompt again, one token longer: its five prompt blocks come back from host memory.
  testing::Request again{"again", low.prompt, testing::Greedy(3)};
  again.prompt.push_back(5);
  Run(again);
  EXPECT_EQ(done_["again"].cached_tokens, 5 * kBlockSize);
  EXPECT_EQ(engine_->kv_tier_stats().host_hit_blocks, 5);
  EXPECT_EQ(engine_->kv_tier_stats().fetch_shortfall_blocks, 0);
  ExpectPacedDemotion();
}

TEST_F(DeviceDemotionTest, RejectsAWatermarkOutsideTheUnitInterval) {
  for (double w : {0.0, -0.5, 1.5}) {
    EngineConfig c;
    c.block_size = kBlockSize;
    c.num_blocks = kPoolBlocks;
    c.device_low_watermark = w;
    auto e = Engine::Create(&model_, backend_.get(), c);
    EXPECT_TRUE(absl::IsInvalidArgument(e.status())) << w << ": " << e.status();
  }
}

}  // namespace
}  // namespace tandem::engine
