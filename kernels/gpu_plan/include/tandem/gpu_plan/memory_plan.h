#pragma once
// How a worker splits one GPU's memory at startup: the model's weights first, then the activation
// workspace for the largest batch it will run, a reserve, and the paged KV pool gets the rest in
// whole blocks. Planned on the host from sizes alone, so a deployment can be checked (and its KV
// capacity known) before anything is allocated.

#include <array>
#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "tandem/kernels/dtype.h"

namespace tandem::gpu_plan {

// cudaMalloc returns 256-byte aligned memory; every region is planned at that granularity.
inline constexpr std::uint64_t kDeviceAlignment = 256;

struct WeightTensor {
  kernels::DType dtype = kernels::DType::kF32;
  std::uint64_t numel = 0;
};

struct MemoryPlanInput {
  std::uint64_t device_bytes = 0;  // what the worker may use (cudaMemGetInfo's free at startup)
  // Every weight tensor held on this device (FP8 block scales are F32 tensors of their own); each
  // is allocated on its own, so each is rounded up to kDeviceAlignment.
  std::span<const WeightTensor> weights = {};
  std::uint64_t max_batch_tokens = 0;           // tokens of the largest forward step
  std::uint64_t activation_bytes_per_token = 0;  // the model's live activations per token
  std::uint64_t workspace_bytes = 0;             // fixed scratch: cuBLAS workspace, plans
  std::uint64_t kv_block_bytes = 0;  // one paged block over all layers
  // Kept free for what the plan does not see (CUDA context growth, NCCL buffers, fragmentation):
  // the larger of the two.
  std::uint64_t reserve_bytes = 0;
  double reserve_fraction = 0.0;  // of device_bytes
  // Fewer KV blocks than this is a failed plan (e.g. the blocks of one max-length request).
  std::uint64_t min_kv_blocks = 1;
};

struct MemoryPlan {
  // Weight bytes per DType (index: static_cast<int>(dtype)), aligned as allocated.
  std::array<std::uint64_t, 4> weight_bytes_by_dtype{};
  std::uint64_t weight_bytes = 0;
  std::uint64_t activation_bytes = 0;  // max_batch_tokens * per token + workspace, aligned
  std::uint64_t reserve_bytes = 0;
  std::uint64_t kv_blocks = 0;
  std::uint64_t kv_bytes = 0;     // kv_blocks * aligned block size
  std::uint64_t unused_bytes = 0;  // less than one KV block: what rounding to whole blocks leaves
};

// Fails with InvalidArgument for inconsistent input (no device bytes, a zero-sized KV block, sizes
// whose products overflow 64 bits) and ResourceExhausted when weights, activations and reserve do
// not leave min_kv_blocks; the message gives every figure so the operator sees what to shrink.
absl::StatusOr<MemoryPlan> PlanDeviceMemory(const MemoryPlanInput& input);

}  // namespace tandem::gpu_plan
