#include "tandem/gpu_plan/expert_placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace tandem::gpu_plan {
namespace {

TEST(ExpertPlacementTest, BalancedIsContiguousAndEven) {
  // DeepSeek-V3: 256 routed experts; 7 ranks does not divide it.
  absl::StatusOr<ExpertPlacement> p = ExpertPlacement::Balanced(256, 7, 40);
  ASSERT_TRUE(p.ok()) << p.status();
  int next = 0;
  for (int r = 0; r < 7; ++r) {
    const std::vector<int> on = p->ExpertsOn(r);
    EXPECT_TRUE(on.size() == 36 || on.size() == 37) << "rank " << r << ": " << on.size();
    for (int e : on) EXPECT_EQ(e, next++);
  }
  EXPECT_EQ(next, 256);
  for (int e = 0; e < 256; ++e) {
    ASSERT_EQ(p->Replicas(e).size(), 1u);
    EXPECT_EQ(p->ExpertAt(p->Replicas(e)[0]), e);
  }
}

TEST(ExpertPlacementTest, BalancedRefusesTooFewSlots) {
  EXPECT_EQ(ExpertPlacement::Balanced(256, 8, 31).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ExpertPlacement::Balanced(256, 8, 32).ok());
  EXPECT_FALSE(ExpertPlacement::Balanced(0, 8, 32).ok());
  EXPECT_FALSE(ExpertPlacement::Balanced(8, 0, 32).ok());
}

TEST(ExpertPlacementTest, FromTableValidates) {
  constexpr int E = ExpertPlacement::kEmpty;
  // 3 experts, 2 ranks x 2 slots.
  EXPECT_TRUE(ExpertPlacement::FromTable(3, 2, 2, {0, 1, 2, E}).ok());
  EXPECT_TRUE(ExpertPlacement::FromTable(3, 2, 2, {0, 1, 2, 0}).ok());  // replica of 0
  EXPECT_EQ(ExpertPlacement::FromTable(3, 2, 2, {0, 1, 1, E}).status().code(),
            absl::StatusCode::kFailedPrecondition);  // 2 orphaned
  EXPECT_EQ(ExpertPlacement::FromTable(3, 2, 2, {0, 0, 1, 2}).status().code(),
            absl::StatusCode::kInvalidArgument);  // 0 twice on rank 0
  EXPECT_FALSE(ExpertPlacement::FromTable(3, 2, 2, {0, 1, 2, 3}).ok());   // out of range
  EXPECT_FALSE(ExpertPlacement::FromTable(3, 2, 2, {0, 1, 2, -2}).ok());  // negative
  EXPECT_FALSE(ExpertPlacement::FromTable(3, 2, 2, {0, 1, 2}).ok());      // wrong size
}

TEST(ExpertPlacementTest, ReplicasAndReplicaChoice) {
  constexpr int E = ExpertPlacement::kEmpty;
  absl::StatusOr<ExpertPlacement> p = ExpertPlacement::FromTable(2, 3, 2, {0, E, 1, 0, E, 0});
  ASSERT_TRUE(p.ok()) << p.status();
  const std::vector<ExpertSlot> want = {{0, 0}, {1, 1}, {2, 1}};
  EXPECT_TRUE(std::ranges::equal(p->Replicas(0), want));
  // Spread over replicas by key, and the same key always picks the same replica.
  for (std::uint64_t key = 0; key < 6; ++key) {
    EXPECT_EQ(p->ReplicaFor(0, key), want[key % 3]);
    EXPECT_EQ(p->ReplicaFor(1, key), (ExpertSlot{1, 0}));
  }
}

TEST(ExpertPlacementTest, ApplyIsAllOrNothing) {
  absl::StatusOr<ExpertPlacement> p = ExpertPlacement::Balanced(4, 2, 3);  // {0,1,E},{2,3,E}
  ASSERT_TRUE(p.ok());
  const ExpertPlacement before = *p;
  // Moving 1 onto rank 1's free slot and then freeing its old slot is fine as one batch...
  const std::vector<SlotAssignment> move = {{{1, 2}, 1}, {{0, 1}, ExpertPlacement::kEmpty}};
  ASSERT_TRUE(p->Apply(move).ok());
  EXPECT_EQ(p->version(), 1u);
  EXPECT_EQ(p->ExpertsOn(1), (std::vector<int>{2, 3, 1}));
  EXPECT_EQ(p->Replicas(1)[0], (ExpertSlot{1, 2}));
  // ...freeing the only copy of 0 is not, and leaves the table as it was.
  const ExpertPlacement moved = *p;
  const std::vector<SlotAssignment> orphan = {{{0, 0}, ExpertPlacement::kEmpty}};
  EXPECT_EQ(p->Apply(orphan).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(p->version(), 1u);
  EXPECT_EQ(p->ExpertsOn(0), moved.ExpertsOn(0));
  const std::vector<SlotAssignment> twice = {{{0, 2}, 3}, {{0, 2}, 2}};
  EXPECT_FALSE(p->Apply(twice).ok());
  const std::vector<SlotAssignment> outside = {{{2, 0}, 3}};
  EXPECT_FALSE(p->Apply(outside).ok());

  absl::StatusOr<std::vector<SlotAssignment>> diff = ExpertPlacement::Diff(before, *p);
  ASSERT_TRUE(diff.ok());
  ASSERT_EQ(diff->size(), 2u);
  EXPECT_EQ((*diff)[0].at, (ExpertSlot{0, 1}));
  EXPECT_EQ((*diff)[0].expert, ExpertPlacement::kEmpty);
  EXPECT_EQ((*diff)[1].at, (ExpertSlot{1, 2}));
  EXPECT_EQ((*diff)[1].expert, 1);
  // Applying the diff to the old table gives the new one.
  ExpertPlacement replay = before;
  ASSERT_TRUE(replay.Apply(*diff).ok());
  for (int r = 0; r < 2; ++r) EXPECT_EQ(replay.ExpertsOn(r), p->ExpertsOn(r));
  EXPECT_FALSE(ExpertPlacement::Diff(before, *ExpertPlacement::Balanced(4, 2, 2)).ok());
}

}  // namespace
}  // namespace tandem::gpu_plan
