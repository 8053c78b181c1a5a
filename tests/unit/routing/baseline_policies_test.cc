// Each baseline against its published rule (docs/routing.md cites them).
#include <set>

#include "cluster_fixture.h"

namespace tandem::routing {
namespace {

using testing::ClusterFixture;

class BaselinePolicyTest : public ClusterFixture {};

TEST_F(BaselinePolicyTest, RoundRobinCyclesEachPool) {
  Build(3, 2);
  auto policy = MakeRoundRobinPolicy();
  const RouteRequest r = Request(Chain(1, 2));
  std::vector<WorkerSlot> prefill, decode;
  for (int i = 0; i < 6; ++i) {
    const RouteDecision d = Route(*policy, r);
    prefill.push_back(d.prefill);
    decode.push_back(d.decode);
  }
  EXPECT_EQ(prefill, (std::vector<WorkerSlot>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(decode, (std::vector<WorkerSlot>{3, 4, 3, 4, 3, 4}));
}

TEST_F(BaselinePolicyTest, LeastLoadPicksFewestInFlightIgnoringCache) {
  Build(3, 2);
  QueuePrefill(0, 2);
  QueuePrefill(1, 1);
  QueuePrefill(2, 3);
  Cache(2, Chain(1, 8));
  table_.OnDecodeDispatched(3, 1);
  auto policy = MakeLeastLoadPolicy();
  const RouteDecision d = Route(*policy, Request(Chain(1, 8)));
  EXPECT_EQ(d.prefill, 1);
  EXPECT_EQ(d.decode, 4);
  EXPECT_EQ(d.predicted_cached_tokens, 0);
}

TEST_F(BaselinePolicyTest, PowerOfTwoNeverPicksTheMostLoaded) {
  Build(3, 0);
  QueuePrefill(0, 1);
  QueuePrefill(1, 2);
  QueuePrefill(2, 9);
  auto policy = MakePowerOfTwoPolicy(/*seed=*/7);
  std::set<WorkerSlot> seen;
  for (int i = 0; i < 200; ++i) seen.insert(Route(*policy, Request(Chain(1, 1))).prefill);
  // Worker 2 loses every comparison; worker 1 wins whenever it is drawn with worker 2.
  EXPECT_EQ(seen, (std::set<WorkerSlot>{0, 1}));
}

TEST_F(BaselinePolicyTest, PoliciesFailWithoutPrefillWorkers) {
  Build(0, 2);
  for (const std::string& name : PolicyNames()) {
    auto policy = MakePolicy(name);
    ASSERT_TRUE(policy.ok());
    EXPECT_EQ((*policy)->Route(Request(Chain(1, 1)), View()).status().code(),
              absl::StatusCode::kUnavailable)
        << name;
  }
  EXPECT_EQ(MakePolicy("random").status().code(), absl::StatusCode::kInvalidArgument);
}

// --- SGLang cache_aware --------------------------------------------------------------------------

class CacheAwareTest : public ClusterFixture {
 protected:
  void SetUp() override { Build(2, 0); }
  // Teaches the policy's approximate tree that `chain` lives on worker w (by routing it there
  // while w is the only sensible choice), then restores the loads.
  void Teach(Policy& policy, const std::vector<BlockHash>& chain, WorkerSlot w) {
    const WorkerSlot other = 1 - w;
    QueuePrefill(other, 1);
    ASSERT_EQ(Route(policy, Request(chain)).prefill, w);
    table_.OnPrefillFinished(other, 1000, 1000 / 16 + 1, 0, 0);
  }
};

TEST_F(CacheAwareTest, FollowsItsOwnTreeNotKvEvents) {
  auto policy = MakeCacheAwarePolicy();
  Teach(*policy, Chain(1, 10), 0);
  // Worker 1 reports the prefix through events, but the approximate tree says worker 0.
  Cache(1, Chain(1, 10));
  QueuePrefill(0, 3);
  EXPECT_EQ(Route(*policy, Request(Chain(1, 10))).prefill, 0);
}

TEST_F(CacheAwareTest, MatchRatioAboveThresholdWinsOverLoad) {
  auto policy = MakeCacheAwarePolicy();
  Teach(*policy, Chain(1, 4), 0);
  QueuePrefill(0, 10);
  // 4 of 10 blocks = 0.4 > 0.3: the matching worker despite its queue.
  std::vector<BlockHash> chain = Chain(1, 4);
  for (BlockHash h : Chain(100, 6)) chain.push_back(h);
  EXPECT_EQ(Route(*policy, Request(chain)).prefill, 0);
}

TEST_F(CacheAwareTest, MatchRatioAtOrBelowThresholdGoesLeastLoaded) {
  auto policy = MakeCacheAwarePolicy();
  Teach(*policy, Chain(1, 3), 0);
  QueuePrefill(0, 10);
  // 3 of 10 blocks = 0.3, not above 0.3: least loaded.
  std::vector<BlockHash> chain = Chain(1, 3);
  for (BlockHash h : Chain(200, 7)) chain.push_back(h);
  EXPECT_EQ(Route(*policy, Request(chain)).prefill, 1);
}

TEST_F(CacheAwareTest, ImbalanceBeyond64And1Point5xSwitchesToLeastLoaded) {
  auto policy = MakeCacheAwarePolicy();
  Teach(*policy, Chain(1, 10), 0);
  QueuePrefill(0, 100);
  QueuePrefill(1, 35);  // spread 65 > 64 and 100 > 1.5 x 35
  EXPECT_EQ(Route(*policy, Request(Chain(1, 10))).prefill, 1);
}

TEST_F(CacheAwareTest, SpreadOf64IsNotImbalanced) {
  auto policy = MakeCacheAwarePolicy();
  Teach(*policy, Chain(1, 10), 0);
  QueuePrefill(0, 100);
  QueuePrefill(1, 36);  // spread 64: not beyond the threshold
  EXPECT_EQ(Route(*policy, Request(Chain(1, 10))).prefill, 0);
}

TEST_F(CacheAwareTest, LargeSpreadWithinRelativeThresholdIsNotImbalanced) {
  auto policy = MakeCacheAwarePolicy();
  Teach(*policy, Chain(1, 10), 0);
  QueuePrefill(0, 300);
  QueuePrefill(1, 210);  // spread 90 > 64, but 300 < 1.5 x 210
  EXPECT_EQ(Route(*policy, Request(Chain(1, 10))).prefill, 0);
}

// --- Dynamo cost ---------------------------------------------------------------------------------

DynamoCostOptions ThreeTimesOverlap() {
  DynamoCostOptions options;
  options.overlap_weight = 3.0;
  return options;
}

class DynamoCostTest : public ClusterFixture {
 protected:
  void SetUp() override { Build(2, 2); }
};

TEST_F(DynamoCostTest, PicksThePredictedCheapest) {
  auto policy = MakeDynamoCostPolicy();
  Cache(0, Chain(1, 8));
  // Worker 0: 10 - 8 = 2 blocks to prefill + 5 active = 7; worker 1: 10 + 0 = 10.
  table_.OnPrefillDispatched(0, 0, 5);
  RouteDecision d = Route(*policy, Request(Chain(1, 10)));
  EXPECT_EQ(d.prefill, 0);
  EXPECT_EQ(d.predicted_cached_tokens, 8 * 16);
  // Worker 0 at 2 + 9 = 11 now costs more than worker 1's 10.
  table_.OnPrefillDispatched(0, 0, 4);
  d = Route(*policy, Request(Chain(1, 10)));
  EXPECT_EQ(d.prefill, 1);
}

TEST_F(DynamoCostTest, CreditsHostHitsAtThreeQuarters) {
  auto policy = MakeDynamoCostPolicy();
  Cache(0, Chain(1, 8), Tier::kHost);  // 10 - 0.75 x 8 = 4 blocks to prefill
  table_.OnPrefillDispatched(0, 0, 4);  // 4 + 4 = 8
  table_.OnPrefillDispatched(1, 0, 1);  // 10 + 1 = 11
  EXPECT_EQ(Route(*policy, Request(Chain(1, 10))).prefill, 0);
  table_.OnPrefillDispatched(0, 0, 3);  // 4 + 7 = 11.0 vs 11: a tie, either may win
  table_.OnPrefillDispatched(0, 0, 1);  // 12 vs 11
  EXPECT_EQ(Route(*policy, Request(Chain(1, 10))).prefill, 1);
}

TEST_F(DynamoCostTest, OverlapWeightScalesThePrefillTerm) {
  auto policy = MakeDynamoCostPolicy(ThreeTimesOverlap());
  Cache(0, Chain(1, 8));
  table_.OnPrefillDispatched(0, 0, 20);  // 3 x 2 + 20 = 26 vs 3 x 10 = 30
  EXPECT_EQ(Route(*policy, Request(Chain(1, 10))).prefill, 0);
}

TEST_F(DynamoCostTest, DecodeGoesToFewestActiveBlocks) {
  auto policy = MakeDynamoCostPolicy();
  table_.OnDecodeDispatched(2, 50);
  table_.OnDecodeDispatched(3, 10);
  table_.OnDecodeDispatched(3, 10);
  EXPECT_EQ(Route(*policy, Request(Chain(1, 2))).decode, 3);
}

TEST_F(DynamoCostTest, BreaksTiesAtRandom) {
  auto policy = MakeDynamoCostPolicy();
  std::set<WorkerSlot> seen;
  for (int i = 0; i < 64; ++i) seen.insert(Route(*policy, Request(Chain(1, 2))).prefill);
  EXPECT_EQ(seen, (std::set<WorkerSlot>{0, 1}));
}

}  // namespace
}  // namespace tandem::routing
