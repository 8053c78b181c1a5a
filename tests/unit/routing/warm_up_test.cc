#include "tandem/routing/warm_up.h"

#include "cluster_fixture.h"

namespace tandem::routing {
namespace {

using testing::ClusterFixture;

class WarmUpPlannerTest : public ClusterFixture {
 protected:
  // A request for the 10-block prefix held by worker 0, plus a block of its own.
  std::vector<BlockHash> Hot(BlockHash tail) {
    std::vector<BlockHash> chain = Chain(1, 10);
    chain.push_back(tail);
    return chain;
  }
  std::optional<WarmUp> Plan(WarmUpPlanner& planner, BlockHash tail, double now = 0) {
    const std::vector<BlockHash> chain = Hot(tail);
    return planner.Plan(chain, /*chosen=*/0, View(), now);
  }
  // Three requests wait on the holder (no copy yet); what the fourth's routing plans.
  std::optional<WarmUp> FourthWait(WarmUpPlanner& planner) {
    for (int i = 0; i < 3; ++i) EXPECT_FALSE(Plan(planner, 100 + i).has_value()) << i;
    return Plan(planner, 200);
  }
  WarmUpPlanner planner_{WarmUpOptions{}};
};

TEST_F(WarmUpPlannerTest, CopiesARunToAnIdleWorkerOnceEnoughRequestsWaitedForItsHolder) {
  Build(3, 0);
  Cache(0, Chain(1, 10));
  QueuePrefill(0, 1);  // the holder is busy: each request routed there waits
  const std::optional<WarmUp> w = FourthWait(planner_);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->worker, 1);
  EXPECT_EQ(w->blocks, 10);  // the holder's run, not the request's own block
  EXPECT_EQ(w->cached_blocks, 0);
  EXPECT_EQ(w->run_end, 10u);
  EXPECT_EQ(planner_.planned(), 1);
}

TEST_F(WarmUpPlannerTest, RequestsThatDoNotWaitCountForNothing) {
  Build(3, 0);
  Cache(0, Chain(1, 10));
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(Plan(planner_, 100 + i).has_value());
}

TEST_F(WarmUpPlannerTest, OnlyAnIdleWorkerTakesACopy) {
  Build(3, 0);
  Cache(0, Chain(1, 10));
  QueuePrefill(0, 1);
  QueuePrefill(1, 1);
  QueuePrefill(2, 1);
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(Plan(planner_, 100 + i).has_value());
}

TEST_F(WarmUpPlannerTest, OneWarmUpPerRunAtATime) {
  Build(3, 0);
  Cache(0, Chain(1, 10));
  QueuePrefill(0, 1);
  const std::optional<WarmUp> first = FourthWait(planner_);
  ASSERT_TRUE(first.has_value());
  EXPECT_FALSE(Plan(planner_, 201).has_value());  // worker 2 is idle, but the run is on its way
  planner_.Done(first->run_end, /*now_seconds=*/10);
  // Until the copy's KV events have had time to reach the index, the run is left alone.
  EXPECT_FALSE(Plan(planner_, 202, /*now=*/10.5).has_value());
  const std::optional<WarmUp> again = Plan(planner_, 203, /*now=*/11);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->worker, 1);  // this table never saw the first one dispatched
}

TEST_F(WarmUpPlannerTest, WaitsLongAgoDecay) {
  Build(2, 0);
  Cache(0, Chain(1, 10));
  QueuePrefill(0, 1);
  for (int i = 0; i < 3; ++i) Plan(planner_, 100 + i, /*now=*/0);
  // 3 waits 600 s ago are worth 3 x e^-4 now: the fourth is not the fourth.
  EXPECT_FALSE(Plan(planner_, 200, /*now=*/600).has_value());
  EXPECT_FALSE(Plan(planner_, 201, 600).has_value());
  EXPECT_FALSE(Plan(planner_, 202, 600).has_value());
  EXPECT_TRUE(Plan(planner_, 203, 600).has_value());
}

TEST_F(WarmUpPlannerTest, TheIdleWorkerHoldingMostOfTheRunIsChosen) {
  Build(4, 0);
  Cache(0, Chain(1, 10));
  Cache(2, Chain(1, 6));
  Cache(3, Chain(1, 10));  // holds it all: it is another holder, busy
  QueuePrefill(0, 1);
  QueuePrefill(3, 1);
  const std::optional<WarmUp> w = FourthWait(planner_);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->worker, 2);
  EXPECT_EQ(w->cached_blocks, 6);
}

TEST_F(WarmUpPlannerTest, AnIdleWorkerThatHoldsTheRunAlreadyIsNoTarget) {
  Build(2, 0);
  Cache(0, Chain(1, 10));
  Cache(1, Chain(1, 10));
  QueuePrefill(0, 1);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(Plan(planner_, 100 + i).has_value());
}

TEST_F(WarmUpPlannerTest, AShortRunIsNotCopied) {
  Build(2, 0);
  Cache(0, Chain(1, 1));
  QueuePrefill(0, 1);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(Plan(planner_, 100 + i).has_value());
}

TEST_F(WarmUpPlannerTest, DisabledOrWithoutPrefillOnlyWorkersNothingIsPlanned) {
  Build(2, 0);
  Cache(0, Chain(1, 10));
  QueuePrefill(0, 1);
  WarmUpPlanner off(WarmUpOptions{.enabled = false});
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(Plan(off, 100 + i).has_value());

  // Combined workers decode what they prefill: their accounting lasts a whole generation.
  table_ = WorkerTable();
  ASSERT_TRUE(table_.Add(0, Role::kCombined).ok());
  ASSERT_TRUE(table_.Add(1, Role::kCombined).ok());
  QueuePrefill(0, 1);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(Plan(planner_, 100 + i).has_value());
}

TEST(WarmUpTest, OnlyTandemWarmsUp) {
  EXPECT_TRUE(PolicyWarmsUp("tandem"));
  for (const std::string& name : PolicyNames()) {
    if (name != "tandem") {
      EXPECT_FALSE(PolicyWarmsUp(name)) << name;
    }
  }
}

}  // namespace
}  // namespace tandem::routing
