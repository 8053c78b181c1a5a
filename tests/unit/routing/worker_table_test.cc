#include "tandem/routing/worker_state.h"

#include "gtest/gtest.h"

namespace tandem::routing {
namespace {

TEST(WorkerTableTest, DispatchAndFinishKeepTheBooks) {
  WorkerTable table;
  ASSERT_TRUE(table.Add(2, Role::kPrefill).ok());
  table.OnPrefillDispatched(2, 1000, 8, /*now_seconds=*/5.0);
  table.OnPrefillDispatched(2, 500, 4, 6.0);
  const WorkerState* s = table.Find(2);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->in_flight, 2);
  EXPECT_EQ(s->queued_prefill_tokens, 1500);
  EXPECT_EQ(s->active_blocks, 12);
  EXPECT_DOUBLE_EQ(s->prefill_head_started_seconds, 5.0);  // the first one started the work
  table.OnPrefillFinished(2, 1000, 8, 1000, 0.5, 7.0);
  EXPECT_EQ(s->in_flight, 1);
  EXPECT_EQ(s->queued_prefill_tokens, 500);
  EXPECT_EQ(s->active_blocks, 4);
  EXPECT_DOUBLE_EQ(s->prefill_head_started_seconds, 7.0);  // the second starts as it ends
  table.OnPrefillFinished(2, 500, 4, 500, 0.25, 7.25);
  EXPECT_EQ(s->in_flight, 0);
  EXPECT_LT(s->prefill_head_started_seconds, 0);
}

TEST(WorkerTableTest, LearnsPrefillSpeedAsAMovingAverage) {
  WorkerTable table(WorkerTable::Options{.ewma_alpha = 0.5});
  ASSERT_TRUE(table.Add(0, Role::kPrefill).ok());
  table.OnPrefillDispatched(0, 100, 1);
  table.OnPrefillFinished(0, 100, 1, 100, 1.0);  // 0.01 s/token: the first sample is taken as is
  EXPECT_DOUBLE_EQ(table.Find(0)->prefill_seconds_per_token, 0.01);
  table.OnPrefillDispatched(0, 100, 1);
  table.OnPrefillFinished(0, 100, 1, 100, 3.0);  // 0.03 s/token
  EXPECT_DOUBLE_EQ(table.Find(0)->prefill_seconds_per_token, 0.02);
  table.OnPrefillDispatched(0, 0, 1);
  table.OnPrefillFinished(0, 0, 1, 0, 0.5);  // a full hit computes nothing: no sample
  EXPECT_DOUBLE_EQ(table.Find(0)->prefill_seconds_per_token, 0.02);
}

TEST(WorkerTableTest, DecodeBooks) {
  WorkerTable table;
  ASSERT_TRUE(table.Add(1, Role::kDecode).ok());
  table.OnDecodeDispatched(1, 10);
  table.OnDecodeDispatched(1, 6);
  table.OnDecodeFinished(1, 10);
  EXPECT_EQ(table.Find(1)->in_flight, 1);
  EXPECT_EQ(table.Find(1)->active_blocks, 6);
  table.OnDecodeStep(1, 4, 0.02);
  EXPECT_DOUBLE_EQ(table.Find(1)->decode_step_seconds, 0.02);
}

TEST(WorkerTableTest, RejectsBadReportsAndUnknownSlots) {
  WorkerTable table;
  ASSERT_TRUE(table.Add(0, Role::kCombined).ok());
  EXPECT_TRUE(table.Report(0, 3, 1, 100, 40).ok());
  EXPECT_EQ(table.Find(0)->free_kv_blocks, 40);
  EXPECT_EQ(table.Report(0, 3, 1, 100, 140).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table.Report(0, -1, 1, 100, 10).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table.Report(3, 0, 0, 0, 0).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table.Add(kMaxWorkers, Role::kPrefill).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table.Find(1), nullptr);
  table.OnPrefillDispatched(9, 1, 1);  // unknown: ignored, no crash
}

}  // namespace
}  // namespace tandem::routing
