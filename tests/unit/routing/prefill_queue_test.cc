#include "tandem/routing/prefill_queue.h"

#include "gtest/gtest.h"

namespace tandem::routing {
namespace {

using Tickets = std::vector<PrefillQueue::Ticket>;

TEST(PrefillQueueTest, ReleasesTheShortestHeldPrefillWhenOneEnds) {
  PrefillQueue q(PrefillQueue::Options{.depth = 1, .aging = 0});
  EXPECT_TRUE(q.Enqueue(1, /*worker=*/0, /*predicted_seconds=*/5, /*now=*/0));
  EXPECT_FALSE(q.Enqueue(2, 0, 4, 0.1));
  EXPECT_FALSE(q.Enqueue(3, 0, 0.5, 0.2));
  EXPECT_FALSE(q.Enqueue(4, 0, 2, 0.3));
  EXPECT_EQ(q.out(0), 1);
  EXPECT_EQ(q.held(0), 3);
  EXPECT_TRUE(q.IsHeld(2));
  EXPECT_EQ(q.total_held(), 3u);
  EXPECT_EQ(q.Done(1), Tickets({3}));
  EXPECT_EQ(q.total_held(), 2u);
  EXPECT_FALSE(q.IsHeld(3));
  EXPECT_EQ(q.Done(3), Tickets({4}));
  EXPECT_EQ(q.Done(4), Tickets({2}));
  EXPECT_EQ(q.Done(2), Tickets());
  EXPECT_EQ(q.out(0), 0);
}

TEST(PrefillQueueTest, HeldPrefillsThatFitTheWorkersStepBudgetGoOutTogetherInOrder) {
  PrefillQueue q(PrefillQueue::Options{.depth = 1, .aging = 0});
  q.SetBatchTokens(0, 100);
  EXPECT_TRUE(q.Enqueue(1, 0, /*predicted_seconds=*/9, 0, /*tokens=*/500));  // alone: over budget
  EXPECT_FALSE(q.Enqueue(2, 0, 0.3, 0, 30));
  EXPECT_FALSE(q.Enqueue(3, 0, 0.1, 0, 10));
  EXPECT_FALSE(q.Enqueue(4, 0, 0.5, 0, 50));
  EXPECT_FALSE(q.Enqueue(5, 0, 0.2, 0, 20));
  // Shortest first while the batch fits: 10 + 20 + 30 = 60, then 50 would make 110.
  EXPECT_EQ(q.Done(1), Tickets({3, 5, 2}));
  EXPECT_EQ(q.out(0), 3);
  EXPECT_EQ(q.held(0), 1);
  // A newcomer that would fit waits behind what is held: the order is kept.
  EXPECT_FALSE(q.Enqueue(6, 0, 0.01, 0, 1));
  EXPECT_EQ(q.Done(3), Tickets({6}));  // 50 out: 6 fits (51), then 4 would make 101
  EXPECT_EQ(q.Done(5), Tickets({4}));  // 31 out: 4 fits (81)
  EXPECT_EQ(q.out(0), 3);
  EXPECT_EQ(q.held(0), 0);
}

TEST(PrefillQueueTest, WithoutABudgetDepthAloneLimitsWhatIsOut) {
  PrefillQueue q(PrefillQueue::Options{.depth = 1, .aging = 0});
  EXPECT_TRUE(q.Enqueue(1, 0, 1, 0, 5));
  EXPECT_FALSE(q.Enqueue(2, 0, 1, 0, 5));
  EXPECT_FALSE(q.Enqueue(3, 0, 1, 0, 5));
  EXPECT_EQ(q.Done(1), Tickets({2}));
}

TEST(PrefillQueueTest, AgingBoundsHowLongALongPrefillWaits) {
  PrefillQueue q(PrefillQueue::Options{.depth = 1, .aging = 0.1});
  ASSERT_TRUE(q.Enqueue(1, 0, 1, 0));
  EXPECT_FALSE(q.Enqueue(2, 0, /*predicted_seconds=*/10, /*now=*/0));  // priority 10
  EXPECT_FALSE(q.Enqueue(3, 0, 1, /*now=*/95));  // 1 + 9.5: the long one has waited long enough
  EXPECT_FALSE(q.Enqueue(4, 0, 1, /*now=*/85));  // 1 + 8.5: still ahead of it
  EXPECT_EQ(q.Done(1), Tickets({4}));
  EXPECT_EQ(q.Done(4), Tickets({2}));
  EXPECT_EQ(q.Done(2), Tickets({3}));
}

TEST(PrefillQueueTest, APieceDoneLetsAShorterHeldPrefillPassTheRestOfItsPrompt) {
  PrefillQueue q(PrefillQueue::Options{.depth = 1, .aging = 0.1});
  ASSERT_TRUE(q.Enqueue(1, 0, /*predicted_seconds=*/3, /*now=*/0, /*tokens=*/3000));
  EXPECT_FALSE(q.Enqueue(2, 0, 0.2, 0.3, 200));  // priority 0.23
  // Its first piece done, 2.5 s are left: priority 2.5 + 0.1 x 0 (its own enqueue time).
  EXPECT_EQ(q.Requeue(1, 2.5, 2500), Tickets({2}));
  EXPECT_TRUE(q.IsHeld(1));
  EXPECT_EQ(q.out(0), 1);
  EXPECT_EQ(q.out_tokens(0), 200);
  EXPECT_EQ(q.tokens(1), 2500);
  EXPECT_EQ(q.Done(2), Tickets({1}));
  // Nothing held: the rest goes on at once.
  EXPECT_EQ(q.Requeue(1, 2, 2000), Tickets({1}));
  EXPECT_EQ(q.out(0), 1);
  EXPECT_EQ(q.out_tokens(0), 2000);
  // Its time in the queue counts: a newcomer later by more than its extra length goes after it.
  EXPECT_FALSE(q.Enqueue(3, 0, 0.5, /*now=*/20));    // 0.5 + 2 = 2.5
  EXPECT_EQ(q.Requeue(1, 1.5, 1500), Tickets({1}));  // 1.5 + 0
  // A held ticket or an unknown one is not out: nothing changes.
  EXPECT_EQ(q.Requeue(3, 0, 0), Tickets());
  EXPECT_EQ(q.Requeue(9, 0, 0), Tickets());
  EXPECT_EQ(q.out(0), 1);
  EXPECT_EQ(q.held(0), 1);
  EXPECT_EQ(q.Done(1), Tickets({3}));
}

TEST(PrefillQueueTest, AHeldPrefillThatGivesUpFreesNoPlace) {
  PrefillQueue q(PrefillQueue::Options{.depth = 1});
  ASSERT_TRUE(q.Enqueue(1, 0, 1, 0));
  ASSERT_FALSE(q.Enqueue(2, 0, 1, 0));
  ASSERT_FALSE(q.Enqueue(3, 0, 2, 0));
  EXPECT_EQ(q.Done(2), Tickets());  // cancelled while held
  EXPECT_EQ(q.total_held(), 1u);
  EXPECT_EQ(q.out(0), 1);
  EXPECT_EQ(q.held(0), 1);
  EXPECT_EQ(q.Done(1), Tickets({3}));
  EXPECT_EQ(q.Done(99), Tickets());  // unknown
}

TEST(PrefillQueueTest, DepthAndWorkersAreIndependent) {
  PrefillQueue q(PrefillQueue::Options{.depth = 2});
  EXPECT_TRUE(q.Enqueue(1, 0, 1, 0));
  EXPECT_TRUE(q.Enqueue(2, 0, 1, 0));
  EXPECT_FALSE(q.Enqueue(3, 0, 1, 0));
  EXPECT_TRUE(q.Enqueue(4, 1, 1, 0));  // another worker has room
  EXPECT_EQ(q.Done(2), Tickets({3}));
  EXPECT_EQ(q.out(0), 2);
  EXPECT_EQ(q.out(1), 1);
}

TEST(PrefillQueueTest, DepthZeroNeverHolds) {
  PrefillQueue q(PrefillQueue::Options{.depth = 0});
  for (PrefillQueue::Ticket t = 1; t <= 5; ++t) EXPECT_TRUE(q.Enqueue(t, 0, 1, 0));
  EXPECT_EQ(q.held(0), 0);
  EXPECT_EQ(q.Done(3), Tickets());
}

TEST(PrefillQueueTest, ReleaseAllEmptiesAWorkersHold) {
  PrefillQueue q(PrefillQueue::Options{.depth = 1, .aging = 0});
  ASSERT_TRUE(q.Enqueue(1, 3, 1, 0));
  ASSERT_FALSE(q.Enqueue(2, 3, 5, 0));
  ASSERT_FALSE(q.Enqueue(3, 3, 2, 0));
  EXPECT_EQ(q.ReleaseAll(3), Tickets({3, 2}));
  EXPECT_EQ(q.held(3), 0);
  EXPECT_EQ(q.out(3), 3);
  // Their ends are counted like any other.
  EXPECT_EQ(q.Done(1), Tickets());
  EXPECT_EQ(q.Done(2), Tickets());
  EXPECT_EQ(q.Done(3), Tickets());
  EXPECT_EQ(q.out(3), 0);
}

TEST(PrefillQueueTest, OnlyTheTandemPolicyHolds) {
  EXPECT_TRUE(PolicyHoldsPrefills("tandem"));
  for (const char* name : {"round-robin", "least-load", "power-of-two", "sglang-cache-aware",
                           "dynamo-cost"}) {
    EXPECT_FALSE(PolicyHoldsPrefills(name)) << name;
  }
}

}  // namespace
}  // namespace tandem::routing
