#include "matmul/matmul.h"

#include <algorithm>
#include <bit>

#include "matmul/matmul_tasks.h"
#include "matmul/panel_matmul.h"
#include "simd/dot_tile.h"

TANDEM_KERNELS_ISA_BEGIN
namespace {

// Tiles: kRowTile x kOutTile for batches; a single row (GEMV) takes kGemvOutTile weight rows at
// once instead, for more independent accumulators and more weight streams in flight.
#if defined(TANDEM_SIMD_AVX512)
constexpr int kRowTile = 4;  // 16 zmm accumulators + 4 weight chunks + 1 input chunk of 32 regs
constexpr int kOutTile = 4;
constexpr int kGemvOutTile = 8;
#elif defined(TANDEM_SIMD_HALF_PASSES)
// AVX2: tiles run as half passes (dot_tile.h), 12 ymm accumulators + 3 weight halves + 1 input
// half. Rows by 4 because batches come in powers of two; the one output row left over by 3 is
// cheap. Measured against the former 2 x 4 of F32x16 (every ymm an accumulator, loads spilled):
// about 1.6-2x the GFLOP/s of one core (docs/performance.md, "AVX2 tiles").
constexpr int kRowTile = 4;
constexpr int kOutTile = 3;
constexpr int kGemvOutTile = 4;  // 1 x 4 F32x16 = 8 ymm: runs at full width
#else
constexpr int kRowTile = 2;
constexpr int kOutTile = 4;
constexpr int kGemvOutTile = 4;
#endif
// Rows of x processed against a thread's whole weight range before moving on: sized so that
// chunk of x stays in L2 while the weights stream through once per chunk.
constexpr std::int64_t kRowChunkFloats = 1 << 18;

// Weight row o as DotTile reads it, for each stored dtype.
template <typename T>
struct PlainRows {  // float32, bf16
  const T* base;
  std::int64_t in;
  const T* operator()(std::int64_t o) const { return base + o * in; }
};
struct F16Rows {
  const std::uint16_t* base;
  std::int64_t in;
  F16Row operator()(std::int64_t o) const { return {base + o * in}; }
};
struct Fp8Rows {
  const std::uint8_t* base;
  std::int64_t in;
  BlockScales scales;
  int shift;  // log2(scales.block_cols)
  const float* ScaleRow(std::int64_t o) const {
    return scales.data + ((o + scales.row0) / scales.block_rows) * scales.cols;
  }
};

// R input rows x O consecutive weight rows starting at row o.
template <int R, int O, typename Rows>
inline void Tile(const float* x, const Rows& w, std::int64_t o, std::int64_t in, float* y,
                 std::int64_t out) {
  decltype(w(0)) rows[O];
  for (int i = 0; i < O; ++i) rows[i] = w(o + i);
  DotTile<R, O>(x, in, rows, in, y, out);
}
template <int R, int O>
inline void Tile(const float* x, const Fp8Rows& w, std::int64_t o, std::int64_t in, float* y,
                 std::int64_t out) {
  const std::uint8_t* rows[O];
  const float* scales[O];
  for (int i = 0; i < O; ++i) {
    rows[i] = w.base + (o + i) * in;
    scales[i] = w.ScaleRow(o + i);
  }
  DotTileFp8<R, O>(x, in, rows, scales, w.shift, in, y, out);
}

template <int O, typename Rows>
void RowsAgainstTile(const float* x, std::int64_t r_begin, std::int64_t r_end, const Rows& w,
                     std::int64_t o, std::int64_t in, float* y, std::int64_t out) {
  std::int64_t r = r_begin;
  for (; r + kRowTile <= r_end; r += kRowTile) {
    Tile<kRowTile, O>(x + r * in, w, o, in, y + r * out, out);
  }
  const std::int64_t left = r_end - r;
  if constexpr (kRowTile > 3) {
    if (left == 3) return Tile<3, O>(x + r * in, w, o, in, y + r * out, out);
  }
  if constexpr (kRowTile > 2) {
    if (left == 2) return Tile<2, O>(x + r * in, w, o, in, y + r * out, out);
  }
  if (left == 1) Tile<1, O>(x + r * in, w, o, in, y + r * out, out);
}

template <int OT, typename Rows>
void OutputRange(const float* x, std::int64_t rows, const Rows& w, std::int64_t in,
                 std::int64_t out, std::int64_t o_begin, std::int64_t o_end, float* y) {
  const std::int64_t chunk =
      std::max<std::int64_t>(kRowTile, kRowChunkFloats / std::max<std::int64_t>(in, 1));
  for (std::int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const std::int64_t r1 = std::min(rows, r0 + chunk);
    std::int64_t o = o_begin;
    for (; o + OT <= o_end; o += OT) RowsAgainstTile<OT>(x, r0, r1, w, o, in, y + o, out);
    for (; o < o_end; ++o) RowsAgainstTile<1>(x, r0, r1, w, o, in, y + o, out);
  }
}

template <int OT, typename Rows>
void MatMulTyped(ThreadPool& pool, const float* x, std::int64_t rows, const Rows& w,
                 std::int64_t in, std::int64_t out, float* y) {
  const std::int64_t blocks = (out + OT - 1) / OT;
  const int tasks = MatMulTasks(pool, rows, out, in, blocks);
  pool.Run(tasks, [&](int task, int) {
    const std::int64_t b0 = blocks * task / tasks;
    const std::int64_t b1 = blocks * (task + 1) / tasks;
    OutputRange<OT>(x, rows, w, in, out, b0 * OT, std::min(out, b1 * OT), y);
  });
}

template <typename Rows>
void MatMulTyped(ThreadPool& pool, const float* x, std::int64_t rows, const Rows& w,
                 std::int64_t in, std::int64_t out, float* y) {
  if (rows == 1) return MatMulTyped<kGemvOutTile>(pool, x, rows, w, in, out, y);
  MatMulTyped<kOutTile>(pool, x, rows, w, in, out, y);
}

}  // namespace

void MatMul(ThreadPool& pool, const float* x, std::int64_t rows, const WeightView& w, float* y) {
  if (w.layout == WeightLayout::kPanels) return PanelMatMul(pool, x, rows, w, y);
  if (rows <= 0 || w.rows <= 0) return;
  const std::int64_t in = w.cols, out = w.rows;
  switch (w.dtype) {
    case DType::kF32:
      return MatMulTyped(pool, x, rows, PlainRows<float>{static_cast<const float*>(w.data), in}, in,
                         out, y);
    case DType::kBF16:
      return MatMulTyped(pool, x, rows,
                         PlainRows<std::uint16_t>{static_cast<const std::uint16_t*>(w.data), in},
                         in, out, y);
    case DType::kF16:
      return MatMulTyped(pool, x, rows, F16Rows{static_cast<const std::uint16_t*>(w.data), in}, in,
                         out, y);
    case DType::kF8E4M3:
      return MatMulTyped(pool, x, rows,
                         Fp8Rows{static_cast<const std::uint8_t*>(w.data), in, w.scales,
                                 std::countr_zero(static_cast<unsigned>(w.scales.block_cols))},
                         in, out, y);
  }
}

TANDEM_KERNELS_ISA_END
