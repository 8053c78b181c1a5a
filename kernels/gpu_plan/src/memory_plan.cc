#include "tandem/gpu_plan/memory_plan.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"

namespace tandem::gpu_plan {
namespace {

std::optional<std::uint64_t> Mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
std::optional<std::uint64_t> Add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}
std::optional<std::uint64_t> AlignUp(std::uint64_t n) {
  const std::optional<std::uint64_t> r = Add(n, kDeviceAlignment - 1);
  if (!r) return std::nullopt;
  return *r / kDeviceAlignment * kDeviceAlignment;
}
absl::Status Overflow(const char* what) {
  return absl::InvalidArgumentError(absl::StrCat("device memory plan: ", what,
                                                 " overflows 64 bits"));
}

}  // namespace

absl::StatusOr<MemoryPlan> PlanDeviceMemory(const MemoryPlanInput& in) {
  if (in.device_bytes == 0) {
    return absl::InvalidArgumentError("device memory plan: no device bytes");
  }
  if (in.kv_block_bytes == 0) {
    return absl::InvalidArgumentError("device memory plan: KV block of 0 bytes");
  }
  if (!(in.reserve_fraction >= 0.0 && in.reserve_fraction < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("device memory plan: reserve fraction ", in.reserve_fraction,
                     " outside [0, 1)"));
  }
  MemoryPlan plan;
  for (const WeightTensor& w : in.weights) {
    std::optional<std::uint64_t> bytes = Mul(w.numel, kernels::DTypeSize(w.dtype));
    if (bytes) bytes = AlignUp(*bytes);
    std::optional<std::uint64_t> total = bytes ? Add(plan.weight_bytes, *bytes) : std::nullopt;
    if (!total) return Overflow("weights");
    plan.weight_bytes = *total;
    plan.weight_bytes_by_dtype[static_cast<int>(w.dtype)] += *bytes;
  }
  std::optional<std::uint64_t> act = Mul(in.max_batch_tokens, in.activation_bytes_per_token);
  if (act) act = AlignUp(*act);
  std::optional<std::uint64_t> ws = AlignUp(in.workspace_bytes);
  if (act && ws) act = Add(*act, *ws);
  if (!act || !ws) return Overflow("activations");
  plan.activation_bytes = *act;
  const double fraction_bytes =
      std::ceil(in.reserve_fraction * static_cast<double>(in.device_bytes));
  plan.reserve_bytes = std::max(in.reserve_bytes, static_cast<std::uint64_t>(fraction_bytes));

  const std::optional<std::uint64_t> block = AlignUp(in.kv_block_bytes);
  std::optional<std::uint64_t> fixed = Add(plan.weight_bytes, plan.activation_bytes);
  if (fixed) fixed = Add(*fixed, plan.reserve_bytes);
  if (!block || !fixed) return Overflow("weights + activations + reserve");
  const std::uint64_t left = in.device_bytes > *fixed ? in.device_bytes - *fixed : 0;
  plan.kv_blocks = left / *block;
  if (plan.kv_blocks < in.min_kv_blocks || plan.kv_blocks == 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "device memory plan: ", in.device_bytes, " bytes hold weights ", plan.weight_bytes,
        " + activations ", plan.activation_bytes, " (", in.max_batch_tokens, " tokens) + reserve ",
        plan.reserve_bytes, ", leaving ", left, " bytes = ", plan.kv_blocks, " KV blocks of ",
        *block, " bytes; need at least ", std::max<std::uint64_t>(in.min_kv_blocks, 1)));
  }
  plan.kv_bytes = plan.kv_blocks * *block;
  plan.unused_bytes = left - plan.kv_bytes;
  return plan;
}

}  // namespace tandem::gpu_plan
