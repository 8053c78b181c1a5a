#include "tandem/routing/worker_slots.h"

#include "gtest/gtest.h"

namespace tandem::routing {
namespace {

TEST(WorkerSlotsTest, SameIdSameSlotAndReleasedSlotsComeBackLast) {
  WorkerSlots slots;
  EXPECT_EQ(*slots.Assign("a"), 0);
  EXPECT_EQ(*slots.Assign("b"), 1);
  EXPECT_EQ(*slots.Assign("a"), 0);
  EXPECT_EQ(slots.Find("b"), 1);
  EXPECT_EQ(slots.Find("zzz"), kNoWorker);
  ASSERT_NE(slots.IdOf(1), nullptr);
  EXPECT_EQ(*slots.IdOf(1), "b");
  slots.Release("a");
  EXPECT_EQ(slots.IdOf(0), nullptr);
  // Slot 0 is free again, but the search goes on from slot 2.
  EXPECT_EQ(*slots.Assign("c"), 2);
  EXPECT_EQ(slots.size(), 2);
}

TEST(WorkerSlotsTest, RunsOutAtTheLimit) {
  WorkerSlots slots;
  for (int i = 0; i < kMaxWorkers; ++i) ASSERT_TRUE(slots.Assign("w" + std::to_string(i)).ok());
  const absl::StatusOr<WorkerSlot> extra = slots.Assign("one-too-many");
  EXPECT_EQ(extra.status().code(), absl::StatusCode::kResourceExhausted);
  slots.Release("w5");
  EXPECT_EQ(*slots.Assign("one-too-many"), 5);
}

}  // namespace
}  // namespace tandem::routing
