#include "tandem/routing/held_moves.h"

#include <map>

#include "gtest/gtest.h"

namespace tandem::routing {
namespace {

// Two prefill workers: 0 runs a long prefill and holds `held`; 1 is idle. What worker 1 would
// compute of each held ticket is given per test.
class HeldMoveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (WorkerSlot w : {0, 1, 2}) ASSERT_TRUE(table_.Add(w, Role::kPrefill).ok());
    Dispatch(/*ticket=*/1, /*worker=*/0, /*tokens=*/8000);  // one second at the prior speed
  }
  // A prefill of `tokens` uncached tokens routed to `worker` at time 0: out or held.
  bool Dispatch(PrefillQueue::Ticket ticket, WorkerSlot worker, std::int64_t tokens) {
    table_.OnPrefillDispatched(worker, tokens, 1, /*now_seconds=*/0);
    return queue_.Enqueue(ticket, worker, static_cast<double>(tokens) / 8000, 0, tokens);
  }
  std::optional<HeldMove> Pick(double now = 0, HeldMoveOptions options = {}) {
    return PickHeldMove(queue_, /*idle=*/1, table_.states(), now, options,
                        [&](PrefillQueue::Ticket t) -> std::int64_t {
                          auto it = on_idle_.find(t);
                          return it == on_idle_.end() ? -1 : it->second;
                        });
  }
  WorkerTable table_;
  PrefillQueue queue_;
  std::map<PrefillQueue::Ticket, std::int64_t> on_idle_;  // uncached on worker 1; absent: refused
};

TEST_F(HeldMoveTest, AnIdleWorkerTakesAPrefillWaitingBehindALongOne) {
  ASSERT_FALSE(Dispatch(2, 0, 100));
  on_idle_[2] = 100;  // nothing of it cached anywhere: the move adds no compute
  const std::optional<HeldMove> move = Pick();
  ASSERT_TRUE(move.has_value());
  EXPECT_EQ(move->ticket, 2u);
  EXPECT_EQ(move->from, 0);
  EXPECT_EQ(move->uncached_tokens, 100);
}

TEST_F(HeldMoveTest, ARecomputeLargerThanTheWaitKeepsItWhereItsPrefixIs) {
  ASSERT_FALSE(Dispatch(2, 0, 100));
  // Its 4,000-token history is cached on worker 0 only: moving adds 0.5 s of compute, weighted 7x
  // against a 1 s wait.
  on_idle_[2] = 4100;
  EXPECT_FALSE(Pick().has_value());
  // Weighted less, the same move pays.
  EXPECT_TRUE(Pick(0, {.extra_compute_weight = 1}).has_value());
}

TEST_F(HeldMoveTest, TheWaitLeftIsWhatTheRunningPrefillHasNotHadYet) {
  ASSERT_FALSE(Dispatch(2, 0, 100));
  on_idle_[2] = 500;                             // 0.05 s more, weighted 7x: 0.35 s
  EXPECT_TRUE(Pick(/*now=*/0.5).has_value());    // ~0.5 s of the long prefill left
  EXPECT_FALSE(Pick(/*now=*/0.75).has_value());  // ~0.27 s left
}

TEST_F(HeldMoveTest, PicksTheHeldPrefillThatGainsMostAndCountsTheQueueAheadOfIt) {
  ASSERT_FALSE(Dispatch(2, 0, 100));
  ASSERT_FALSE(Dispatch(3, 0, 200));
  on_idle_[2] = 100;
  on_idle_[3] = 200;  // behind ticket 2 as well: the longer wait
  const std::optional<HeldMove> move = Pick();
  ASSERT_TRUE(move.has_value());
  EXPECT_EQ(move->ticket, 3u);
}

TEST_F(HeldMoveTest, NothingMovesWhenRefusedDisabledOrNothingIsHeld) {
  EXPECT_FALSE(Pick().has_value());  // nothing held
  ASSERT_FALSE(Dispatch(2, 0, 100));
  EXPECT_FALSE(Pick().has_value());  // the idle worker cannot take it (another KV layout)
  on_idle_[2] = 100;
  EXPECT_FALSE(Pick(0, {.enabled = false}).has_value());
  EXPECT_TRUE(Pick().has_value());
}

TEST_F(HeldMoveTest, TheQueueMovesATicketKeepingItsTimeHeld) {
  ASSERT_FALSE(Dispatch(2, 0, 100));
  EXPECT_EQ(queue_.HeldFor(0), std::vector<PrefillQueue::Ticket>{2});
  EXPECT_TRUE(queue_.Move(2, 1, 100.0 / 8000, 100));  // worker 1 has room: it starts
  EXPECT_FALSE(queue_.IsHeld(2));
  EXPECT_EQ(queue_.held(0), 0);
  EXPECT_EQ(queue_.out(1), 1);
  EXPECT_EQ(queue_.out_tokens(1), 100);
  // Ending it frees worker 1's place, not worker 0's.
  EXPECT_TRUE(queue_.Done(2).empty());
  EXPECT_EQ(queue_.out(1), 0);
  EXPECT_EQ(queue_.out(0), 1);
}

TEST(WorkerTableWithdrawTest, AWithdrawnPrefillLeavesTheRunningOnesStart) {
  WorkerTable table;
  ASSERT_TRUE(table.Add(0, Role::kPrefill).ok());
  table.OnPrefillDispatched(0, 1000, 4, /*now_seconds=*/2);
  table.OnPrefillDispatched(0, 100, 1, /*now_seconds=*/3);
  table.OnPrefillWithdrawn(0, 100, 1);
  const WorkerState& s = table.states()[0];
  EXPECT_EQ(s.in_flight, 1);
  EXPECT_EQ(s.queued_prefill_tokens, 1000);
  EXPECT_EQ(s.active_blocks, 4);
  EXPECT_EQ(s.prefill_head_started_seconds, 2);  // OnPrefillFinished would have reset it
  table.OnPrefillWithdrawn(0, 1000, 4);
  EXPECT_EQ(table.states()[0].prefill_head_started_seconds, -1);
}

}  // namespace
}  // namespace tandem::routing
