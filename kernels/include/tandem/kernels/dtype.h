#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tandem::kernels {

// kF8E4M3 is OCP e4m3fn (torch.float8_e4m3fn, safetensors F8_E4M3): 4 exponent bits (bias 7), 3
// mantissa bits, no infinities, 0x7f/0xff NaN; always paired with block scales (BlockScales).
enum class DType : std::uint8_t { kF32, kBF16, kF16, kF8E4M3 };

constexpr std::size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kBF16:
    case DType::kF16: return 2;
    case DType::kF8E4M3: return 1;
  }
  return 0;
}
constexpr std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kF8E4M3: return "F8_E4M3";
  }
  return "?";
}

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

// IEEE binary16 to float32; exact for every input (subnormals included), as F16C's vcvtph2ps.
inline float F16ToF32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000U) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fU;
  const std::uint32_t man = h & 0x3ffU;
  if (exp == 0) {  // zero or subnormal: man * 2^-24, exact in float32
    const float mag = static_cast<float>(man) * 0x1p-24f;
    return sign != 0 ? -mag : mag;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000U | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

// e4m3fn to float32, exact. NaN encodings decode to NaN here; the vectorised kernels do not
// special-case them (quantised checkpoints hold none: the quantiser saturates at +-448).
inline float Fp8E4M3ToF32(std::uint8_t v) {
  const std::uint32_t exp = (v >> 3) & 0xfU;
  const std::uint32_t man = v & 0x7U;
  float mag;
  if (exp == 15 && man == 7) {
    mag = NAN;
  } else if (exp == 0) {
    mag = static_cast<float>(man) * 0x1p-9f;
  } else {
    mag = std::bit_cast<float>(((exp + 120) << 23) | (man << 20));
  }
  return (v & 0x80U) != 0 ? -mag : mag;
}

// DeepSeek's block-wise FP8 scales (weight_scale_inv): element (r, c) of the weight is
// fp8(r, c) * data[((r + row0) / block_rows) * cols + c / block_cols]. row0 lets a row slice
// (one expert, one head) keep indexing the full tensor's scale grid.
struct BlockScales {
  const float* data = nullptr;
  std::int64_t cols = 0;  // scale columns: ceil(weight cols / block_cols)
  int block_rows = 0;
  int block_cols = 0;  // a power of two >= 16 (the kernels step scales by whole 16-lane chunks)
  std::int64_t row0 = 0;

  float At(std::int64_t r, std::int64_t c) const {
    return data[((r + row0) / block_rows) * cols + c / block_cols];
  }
};

// How a matrix's elements are laid out in memory.
//  kRows: row-major, [rows][cols], as checkpoints store it.
//  kPanels: MatMul's packed layout (panels.h): rows grouped in panels of kPanelRows, each panel
//    stored column by column ([rows / kPanelRows][cols][kPanelRows], the last panel padded), so a
//    MatMul reads one column of a panel's outputs as consecutive elements. Only MatMul takes it.
//  kBf16Tiles: bf16 only, the AMX MatMul's packed layout (panels.h): rows in groups of
//    kTileGroupRows and columns in chunks of kTileChunkCols, each group x chunk block (1 KiB)
//    stored as AMX's second tile operand, column pair by column pair ([cols / 2][16 rows][2]), the
//    blocks of a row group consecutive ([rows / 16][cols / 32][16][16][2]); rows and columns are
//    padded with zeros to whole blocks. Only MatMul takes it.
enum class WeightLayout : std::uint8_t { kRows, kPanels, kBf16Tiles };
inline constexpr std::int64_t kPanelRows = 32;
inline constexpr std::int64_t kTileGroupRows = 16;
inline constexpr std::int64_t kTileChunkCols = 32;

// A matrix [rows][cols] (a vector has rows == 1) in its stored dtype, used in place (e.g. straight
// from a memory-mapped checkpoint) or packed once (panels.h). Pointers belong to the backend's
// memory space.
struct WeightView {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  BlockScales scales{};  // kF8E4M3 only
  WeightLayout layout = WeightLayout::kRows;

  bool empty() const { return data == nullptr; }
  std::int64_t numel() const { return rows * cols; }
  // Element (r, c)'s index in data.
  std::int64_t Index(std::int64_t r, std::int64_t c) const {
    if (layout == WeightLayout::kPanels) {
      return ((r / kPanelRows) * cols + c) * kPanelRows + r % kPanelRows;
    }
    if (layout == WeightLayout::kBf16Tiles) {
      const std::int64_t chunks = (cols + kTileChunkCols - 1) / kTileChunkCols;
      const std::int64_t block = (r / kTileGroupRows) * chunks + c / kTileChunkCols;
      return block * kTileGroupRows * kTileChunkCols +
             (c % kTileChunkCols / 2) * (2 * kTileGroupRows) + r % kTileGroupRows * 2 + c % 2;
    }
    return r * cols + c;
  }
  // Host-only element access for loaders, tests and slow paths; FP8 is dequantised in float32
  // (fp8 * scale, one rounding), the value every kernel multiplies by.
  float At(std::int64_t r, std::int64_t c) const {
    const std::int64_t i = Index(r, c);
    switch (dtype) {
      case DType::kF32: return static_cast<const float*>(data)[i];
      case DType::kBF16: return Bf16ToF32(static_cast<const std::uint16_t*>(data)[i]);
      case DType::kF16: return F16ToF32(static_cast<const std::uint16_t*>(data)[i]);
      case DType::kF8E4M3:
        return Fp8E4M3ToF32(static_cast<const std::uint8_t*>(data)[i]) * scales.At(r, c);
    }
    return 0.0f;
  }
  // Rows [first, first+count) as a view of their own (experts stacked in one tensor, head slices).
  // Packed panels slice at whole panels only (`first` a multiple of kPanelRows), bf16 tiles at
  // whole row groups (a multiple of kTileGroupRows).
  WeightView RowSlice(std::int64_t first, std::int64_t count) const {
    WeightView v{static_cast<const std::uint8_t*>(data) + Index(first, 0) * DTypeSize(dtype),
                 dtype, count, cols, scales, layout};
    v.scales.row0 += first;
    return v;
  }
};

}  // namespace tandem::kernels
