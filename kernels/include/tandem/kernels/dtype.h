#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tandem::kernels {

enum class DType : std::uint8_t { kF32, kBF16 };

constexpr std::size_t DTypeSize(DType t) { return t == DType::kF32 ? 4 : 2; }
constexpr std::string_view DTypeName(DType t) { return t == DType::kF32 ? "F32" : "BF16"; }

inline float Bf16ToF32(std::uint16_t v) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(v) << 16);
}

// Round-to-nearest-even, as torch does when casting float32 to bfloat16.
inline std::uint16_t F32ToBf16(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffU) > 0x7f800000U) return static_cast<std::uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffU + ((u >> 16) & 1U);
  return static_cast<std::uint16_t>(u >> 16);
}

// A row-major matrix [rows][cols] (a vector has rows == 1) in its stored dtype, used in place
// (e.g. straight from a memory-mapped checkpoint). Pointers belong to the backend's memory space.
struct WeightView {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;

  bool empty() const { return data == nullptr; }
  std::int64_t numel() const { return rows * cols; }
  // Host-only element access for loaders, tests and slow paths.
  float At(std::int64_t r, std::int64_t c) const {
    const std::int64_t i = r * cols + c;
    return dtype == DType::kF32 ? static_cast<const float*>(data)[i]
                                : Bf16ToF32(static_cast<const std::uint16_t*>(data)[i]);
  }
  // Rows [first, first+count) as a view of their own (experts stacked in one tensor, head slices).
  WeightView RowSlice(std::int64_t first, std::int64_t count) const {
    return {static_cast<const std::uint8_t*>(data) + first * cols * DTypeSize(dtype), dtype, count,
            cols};
  }
};

}  // namespace tandem::kernels
