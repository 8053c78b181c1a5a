#include "matmul.h"

#include <algorithm>

#include "dot_tile.h"

namespace tandem::kernels::cpu {
namespace {

// Tiles: kRowTile x kOutTile for batches; a single row (GEMV) takes kGemvOutTile weight rows at
// once instead, for more independent accumulators and more weight streams in flight.
constexpr int kOutTile = 4;
#if defined(__AVX512F__)
constexpr int kRowTile = 4;  // 16 zmm accumulators + 4 weight chunks + 1 input chunk of 32 regs
constexpr int kGemvOutTile = 8;
#else
constexpr int kRowTile = 2;  // F32x16 is two ymm here; keep the accumulators within 16 registers
constexpr int kGemvOutTile = 4;
#endif
// Rows of x processed against a thread's whole weight range before moving on: sized so that
// chunk of x stays in L2 while the weights stream through once per chunk.
constexpr std::int64_t kRowChunkFloats = 1 << 18;
// Below this many multiply-adds a call runs on the calling thread: waking workers costs more.
constexpr std::int64_t kParallelMacs = 1 << 19;
constexpr int kTasksPerThread = 4;  // dynamic hand-out evens out cores shared with other work

// R input rows x O consecutive weight rows.
template <int R, int O, typename W>
inline void Tile(const float* x, const W* w, std::int64_t in, float* y, std::int64_t out) {
  const W* rows[O];
  for (int o = 0; o < O; ++o) rows[o] = w + o * in;
  DotTile<R, O>(x, in, rows, in, y, out);
}

template <int O, typename W>
void RowsAgainstTile(const float* x, std::int64_t r_begin, std::int64_t r_end, const W* w,
                     std::int64_t in, float* y, std::int64_t out) {
  std::int64_t r = r_begin;
  for (; r + kRowTile <= r_end; r += kRowTile) Tile<kRowTile, O>(x + r * in, w, in, y + r * out, out);
  const std::int64_t left = r_end - r;
  if constexpr (kRowTile > 3) {
    if (left == 3) return Tile<3, O>(x + r * in, w, in, y + r * out, out);
  }
  if constexpr (kRowTile > 2) {
    if (left == 2) return Tile<2, O>(x + r * in, w, in, y + r * out, out);
  }
  if (left == 1) Tile<1, O>(x + r * in, w, in, y + r * out, out);
}

template <int OT, typename W>
void OutputRange(const float* x, std::int64_t rows, const W* w, std::int64_t in, std::int64_t out,
                 std::int64_t o_begin, std::int64_t o_end, float* y) {
  const std::int64_t chunk =
      std::max<std::int64_t>(kRowTile, kRowChunkFloats / std::max<std::int64_t>(in, 1));
  for (std::int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const std::int64_t r1 = std::min(rows, r0 + chunk);
    std::int64_t o = o_begin;
    for (; o + OT <= o_end; o += OT) RowsAgainstTile<OT>(x, r0, r1, w + o * in, in, y + o, out);
    for (; o < o_end; ++o) RowsAgainstTile<1>(x, r0, r1, w + o * in, in, y + o, out);
  }
}

template <int OT, typename W>
void MatMulTyped(ThreadPool& pool, const float* x, std::int64_t rows, const W* w, std::int64_t in,
                 std::int64_t out, float* y) {
  const std::int64_t blocks = (out + OT - 1) / OT;
  const bool parallel = rows * out * in >= kParallelMacs && pool.size() > 1;
  const int tasks =
      parallel ? static_cast<int>(std::min<std::int64_t>(blocks, pool.size() * kTasksPerThread)) : 1;
  pool.Run(tasks, [&](int task, int) {
    const std::int64_t b0 = blocks * task / tasks;
    const std::int64_t b1 = blocks * (task + 1) / tasks;
    OutputRange<OT>(x, rows, w, in, out, b0 * OT, std::min(out, b1 * OT), y);
  });
}

template <typename W>
void MatMulTyped(ThreadPool& pool, const float* x, std::int64_t rows, const W* w, std::int64_t in,
                 std::int64_t out, float* y) {
  if (rows == 1) return MatMulTyped<kGemvOutTile>(pool, x, rows, w, in, out, y);
  MatMulTyped<kOutTile>(pool, x, rows, w, in, out, y);
}

}  // namespace

void MatMul(ThreadPool& pool, const float* x, std::int64_t rows, const WeightView& w, float* y) {
  if (rows <= 0 || w.rows <= 0) return;
  if (w.dtype == DType::kF32) {
    MatMulTyped(pool, x, rows, static_cast<const float*>(w.data), w.cols, w.rows, y);
  } else {
    MatMulTyped(pool, x, rows, static_cast<const std::uint16_t*>(w.data), w.cols, w.rows, y);
  }
}

}  // namespace tandem::kernels::cpu
