#pragma once
// What the two engines of bf16 products share (AMX tiles: amx_matmul.cc, amx_attention.cc;
// AVX512-BF16 dot products: dpbf16_matmul.cc): the rounding of x to bf16, and one call of a MatMul
// over WeightLayout::kBf16Tiles weights and where its outputs go. The AVX-512 copy only.
#include <algorithm>
#include <cstdint>
#include <span>

#include "runtime/thread_pool.h"
#include "simd/isa.h"
#include "tandem/kernels/dtype.h"

#if defined(TANDEM_SIMD_AVX512)
TANDEM_KERNELS_ISA_BEGIN

// The AVX-512 copy's target plus AVX512-BF16 (the bf16 conversion and VDPBF16PS); the AMX target
// (amx_tiles.h) adds the tile instructions, so its functions inline these. Lambdas get no target
// of their own, so every function that uses these instructions is a named one.
#define TANDEM_BF16_TARGET \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

// The first n of 16 lanes (none for n <= 0, all from 16 on).
inline __mmask16 FirstLanes(std::int64_t n) {
  return static_cast<__mmask16>(n >= 16 ? 0xffff : n <= 0 ? 0 : (1u << n) - 1);
}

// p[0, n) (n <= 32) rounded to bf16, nearest even (as F32ToBf16 in dtype.h and torch's cast),
// zeros after: 64 bytes, element i in bits [16i, 16i + 16).
TANDEM_BF16_TARGET inline __m512i Bf16x32(const float* p, std::int64_t n) {
  const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(FirstLanes(n - 16), p + 16),
                                         _mm512_maskz_loadu_ps(FirstLanes(n), p));
  return reinterpret_cast<const __m512i&>(v);
}

struct Bf16TilesJob {
  const void* xp;  // x as the engine packed it
  std::int64_t rows;
  const std::uint16_t* w;  // bf16 tiles
  std::int64_t chunks;     // weight tiles per row group (in / 32, rounded up)
  std::int64_t out;
  float* y;
  // > 0: the weights are a gated pair (PanelWeight::PackGated) and y is [rows][hidden] =
  // silu(gate) * up, combined as each pair of groups leaves its accumulators.
  std::int64_t hidden = 0;
  // Not empty: the weights are matrices stacked by PanelWeight::PackStacked, part i's outputs
  // going to outputs[i] ([rows][part_rows[i]]) instead of y.
  std::span<const std::int64_t> part_rows;
  std::span<float* const> outputs;
};

// Where the outputs of weight group g go: a row stride, the first output's column and how many
// of the group's 16 outputs exist.
struct Bf16TilesDest {
  float* y;
  std::int64_t stride, o0, on;
};

inline Bf16TilesDest DestOf(const Bf16TilesJob& job, std::int64_t g) {
  constexpr std::int64_t kOutputs = kTileGroupRows;
  if (job.part_rows.empty()) {
    return {job.y, job.out, g * kOutputs, std::min(kOutputs, job.out - g * kOutputs)};
  }
  std::int64_t first = 0;  // the part's first group
  std::size_t i = 0;
  for (; i + 1 < job.part_rows.size(); ++i) {
    const std::int64_t groups = (job.part_rows[i] + kOutputs - 1) / kOutputs;
    if (g < first + groups) break;
    first += groups;
  }
  const std::int64_t o0 = (g - first) * kOutputs;
  return {job.outputs[i], job.part_rows[i], o0, std::min(kOutputs, job.part_rows[i] - o0)};
}

// The job of one call whose x the engine packed into xp.
inline Bf16TilesJob JobOf(const void* xp, std::int64_t rows, const WeightView& w,
                          std::int64_t hidden, std::span<const std::int64_t> part_rows,
                          std::span<float* const> outputs, float* y) {
  return {.xp = xp,
          .rows = rows,
          .w = static_cast<const std::uint16_t*>(w.data),
          .chunks = (w.cols + kTileChunkCols - 1) / kTileChunkCols,
          .out = w.rows,
          .y = y,
          .hidden = hidden,
          .part_rows = part_rows,
          .outputs = outputs};
}

// Both engines' tasks take pairs of weight groups (a gated pair's gate and up groups together):
// task t of `tasks` runs group_range(g_begin, g_end) over its share of the `units` pairs.
template <typename GroupRange>
void RunGroupPairs(ThreadPool& pool, int tasks, std::int64_t units, std::int64_t groups,
                   const GroupRange& group_range) {
  pool.Run(tasks, [&](int task, int) {
    const std::int64_t u0 = units * task / tasks, u1 = units * (task + 1) / tasks;
    group_range(2 * u0, std::min(groups, 2 * u1));
  });
}

TANDEM_KERNELS_ISA_END
#endif  // TANDEM_SIMD_AVX512
