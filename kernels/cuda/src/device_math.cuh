#pragma once
// Device twins of dtype.h's conversions, written with the same bit operations so that host and
// device round identically.

#include <cstdint>

namespace tandem::kernels::cuda::device {

__device__ __forceinline__ float Bf16ToF32(std::uint16_t v) {
  return __uint_as_float(static_cast<std::uint32_t>(v) << 16);
}

__device__ __forceinline__ std::uint16_t F32ToBf16(float f) {
  std::uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffU) > 0x7f800000U) return static_cast<std::uint16_t>((u >> 16) | 0x40);
  u += 0x7fffU + ((u >> 16) & 1U);
  return static_cast<std::uint16_t>(u >> 16);
}

}  // namespace tandem::kernels::cuda::device

namespace tandem::kernels::cuda {

// A grid of at most this many CTAs walks any n with a stride loop: enough to fill every SM of
// the largest device several times over, and within gridDim.x's limit.
inline constexpr std::int64_t kMaxGrid = 1 << 16;

inline unsigned GridFor(std::int64_t n, int threads) {
  const std::int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < kMaxGrid ? (blocks > 0 ? blocks : 1) : kMaxGrid);
}

}  // namespace tandem::kernels::cuda
