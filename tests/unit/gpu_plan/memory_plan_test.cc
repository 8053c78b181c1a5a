#include "tandem/gpu_plan/memory_plan.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace tandem::gpu_plan {
namespace {

using kernels::DType;

constexpr std::uint64_t kMiB = 1ULL << 20;
constexpr std::uint64_t kGiB = 1ULL << 30;

TEST(MemoryPlanTest, WeightsActivationsReserveThenWholeKvBlocks) {
  // 100 bf16 elements = 200 bytes (aligned to 256), 1000 fp8 = 1000 (1024), 10 f32 = 40 (256).
  const std::vector<WeightTensor> weights = {
      {DType::kBF16, 100}, {DType::kF8E4M3, 1000}, {DType::kF32, 10}, {DType::kBF16, 128}};
  MemoryPlanInput in{.device_bytes = 10 * kMiB,
                     .weights = weights,
                     .max_batch_tokens = 100,
                     .activation_bytes_per_token = 1000,  // 100000 -> 100096
                     .workspace_bytes = 4096,
                     .kv_block_bytes = 1000,  // -> 1024
                     .reserve_bytes = kMiB};
  absl::StatusOr<MemoryPlan> plan = PlanDeviceMemory(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->weight_bytes_by_dtype[static_cast<int>(DType::kBF16)], 256u + 256u);
  EXPECT_EQ(plan->weight_bytes_by_dtype[static_cast<int>(DType::kF8E4M3)], 1024u);
  EXPECT_EQ(plan->weight_bytes_by_dtype[static_cast<int>(DType::kF32)], 256u);
  EXPECT_EQ(plan->weight_bytes, 1792u);
  EXPECT_EQ(plan->activation_bytes, 100096u + 4096u);
  EXPECT_EQ(plan->reserve_bytes, kMiB);
  const std::uint64_t left = 10 * kMiB - 1792 - 104192 - kMiB;
  EXPECT_EQ(plan->kv_blocks, left / 1024);
  EXPECT_EQ(plan->kv_bytes, plan->kv_blocks * 1024);
  EXPECT_EQ(plan->unused_bytes, left % 1024);
  EXPECT_EQ(plan->weight_bytes + plan->activation_bytes + plan->reserve_bytes + plan->kv_bytes +
                plan->unused_bytes,
            in.device_bytes);
}

TEST(MemoryPlanTest, ReserveIsTheLargerOfBytesAndFraction) {
  MemoryPlanInput in{.device_bytes = 100 * kMiB, .kv_block_bytes = kMiB,
                     .reserve_bytes = kMiB, .reserve_fraction = 0.1};
  absl::StatusOr<MemoryPlan> plan = PlanDeviceMemory(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->reserve_bytes, 10 * kMiB);
  EXPECT_EQ(plan->kv_blocks, 90u);
  in.reserve_bytes = 20 * kMiB;
  plan = PlanDeviceMemory(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->kv_blocks, 80u);
}

TEST(MemoryPlanTest, TooLittleLeftForKvIsResourceExhausted) {
  const std::vector<WeightTensor> weights = {{DType::kBF16, 60 * kMiB}};  // 120 MiB
  MemoryPlanInput in{.device_bytes = 128 * kMiB, .weights = weights,
                     .kv_block_bytes = kMiB, .reserve_bytes = 4 * kMiB, .min_kv_blocks = 4};
  EXPECT_TRUE(PlanDeviceMemory(in).ok());  // exactly 4 blocks left
  in.min_kv_blocks = 5;
  absl::StatusOr<MemoryPlan> plan = PlanDeviceMemory(in);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(plan.status().message().find("4 KV blocks"), std::string_view::npos)
      << plan.status();
  in.min_kv_blocks = 0;  // still at least one block, or there is nothing to serve with
  in.reserve_bytes = 8 * kMiB;
  EXPECT_EQ(PlanDeviceMemory(in).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(MemoryPlanTest, RefusesInconsistentInput) {
  EXPECT_FALSE(PlanDeviceMemory({.device_bytes = 0, .kv_block_bytes = 1}).ok());
  EXPECT_FALSE(PlanDeviceMemory({.device_bytes = kGiB, .kv_block_bytes = 0}).ok());
  EXPECT_FALSE(
      PlanDeviceMemory({.device_bytes = kGiB, .kv_block_bytes = 1, .reserve_fraction = 1.0}).ok());
  const std::uint64_t huge = std::numeric_limits<std::uint64_t>::max() / 2;
  const std::vector<WeightTensor> weights = {{DType::kF32, huge}};
  EXPECT_EQ(PlanDeviceMemory({.device_bytes = kGiB, .weights = weights, .kv_block_bytes = 1})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(PlanDeviceMemory({.device_bytes = kGiB, .max_batch_tokens = huge,
                                 .activation_bytes_per_token = 4, .kv_block_bytes = 1})
                   .ok());
}

}  // namespace
}  // namespace tandem::gpu_plan
