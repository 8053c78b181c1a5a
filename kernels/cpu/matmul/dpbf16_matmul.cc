#include "matmul/dpbf16_matmul.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <utility>

#include "matmul/bf16_tiles_job.h"
#include "matmul/matmul_tasks.h"
#include "simd/simd_math.h"

#if defined(TANDEM_SIMD_AVX512)
TANDEM_KERNELS_ISA_BEGIN
namespace {

// Rows of x per register block: 12 rows x 2 weight groups = 24 accumulators, plus the two groups'
// weights and the broadcast pair, of the 32 vector registers.
constexpr std::int64_t kPanelRows = 12;
constexpr std::int64_t kOutputs = kTileGroupRows;        // outputs per weight group (16 lanes)
constexpr std::int64_t kPairs = kTileChunkCols / 2;      // column pairs per weight tile
constexpr std::int64_t kPairElems = 2 * kTileGroupRows;  // one pair of a group: 64 bytes
// x's packed panels per pass over a task's outputs: the pass stays in L2 (<= 1 MiB) while every
// weight group of the task streams past it.
constexpr std::int64_t kPassBytes = 1 << 20;
// Decode blocks (a few rows) stream their weights from memory: prefetch this far ahead.
constexpr std::int64_t kWeightPrefetchBytes = 1024;

// x as bf16 column pairs, in panels of kPanelRows rows: panel i holds rows [12 i, 12 i + h),
// h = min(12, rows - 12 i), as [chunk][h][16] 32-bit words (word k of row j in chunk c: columns
// 32 c + 2 k and + 1, zeros past `in`), starting at 12 i * pairs words: a row's chunk is one
// 64-byte store here, and a block reads the 16 pairs of its rows at fixed offsets from one
// pointer. Panels [p0, p1).
TANDEM_BF16_TARGET void PackPanels(const float* x, std::int64_t rows, std::int64_t in,
                                   std::int64_t pairs, std::int64_t p0, std::int64_t p1,
                                   std::uint32_t* xp) {
  for (std::int64_t p = p0; p < p1; ++p) {
    const std::int64_t r0 = p * kPanelRows, h = std::min(kPanelRows, rows - r0);
    std::uint32_t* panel = xp + r0 * pairs;
    for (std::int64_t j = 0; j < h; ++j) {
      const float* row = x + (r0 + j) * in;
      for (std::int64_t q = 0; q < pairs; q += kPairs) {
        const std::int64_t c = 2 * q;
        _mm512_storeu_si512(panel + (q / kPairs * h + j) * kPairs,
                            Bf16x32(row + c, std::clamp<std::int64_t>(in - c, 0, kTileChunkCols)));
      }
    }
  }
}

// Rows [r0, r0 + R) (one panel) against weight groups g and, with kTwo, g + 1: the whole
// reduction pair by pair onto zeroed accumulators, then to the job's destination.
template <int R, bool kTwo>
TANDEM_BF16_TARGET void Block(const Bf16TilesJob& job, std::int64_t pairs,
                              const std::uint32_t* panel, std::int64_t r0, std::int64_t g,
                              bool prefetch) {
  const std::uint16_t* w0 = job.w + g * job.chunks * kTileGroupRows * kTileChunkCols;
  const std::uint16_t* w1 = w0 + job.chunks * kTileGroupRows * kTileChunkCols;
  __m512 a0[R], a1[R];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    a0[i] = _mm512_setzero_ps();
    if constexpr (kTwo) a1[i] = _mm512_setzero_ps();
  }
  for (std::int64_t q = 0; q < pairs; ++q) {
    const std::int64_t k = q % kPairs;
    if (prefetch) {
      _mm_prefetch(reinterpret_cast<const char*>(w0 + q * kPairElems) + kWeightPrefetchBytes,
                   _MM_HINT_T0);
      if constexpr (kTwo) {
        _mm_prefetch(reinterpret_cast<const char*>(w1 + q * kPairElems) + kWeightPrefetchBytes,
                     _MM_HINT_T0);
      }
    }
    const __m512bh wa = (__m512bh)_mm512_loadu_si512(w0 + q * kPairElems);
    __m512bh wb;
    if constexpr (kTwo) wb = (__m512bh)_mm512_loadu_si512(w1 + q * kPairElems);
    const std::uint32_t* xq = panel + (q - k) * R + k;
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const __m512bh xb = (__m512bh)_mm512_set1_epi32(static_cast<int>(xq[i * kPairs]));
      a0[i] = _mm512_dpbf16_ps(a0[i], xb, wa);
      if constexpr (kTwo) a1[i] = _mm512_dpbf16_ps(a1[i], xb, wb);
    }
  }
  if (job.hidden > 0) {
    // A gated pair: group g is a gate group, g + 1 its up group; SiluMul's own expression on the
    // two accumulators (the same bits as the products apart followed by SiluMul).
    if constexpr (kTwo) {
      const std::int64_t o0 = g / 2 * kOutputs;
      const __mmask16 m = FirstLanes(job.hidden - o0);
      const V16f one = SplatV(1.0f);
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        const V16f gv = reinterpret_cast<const V16f&>(a0[i]);
        const V16f v = gv / (one + ExpV(-gv)) * reinterpret_cast<const V16f&>(a1[i]);
        _mm512_mask_storeu_ps(job.y + (r0 + i) * job.hidden + o0, m,
                              reinterpret_cast<const __m512&>(v));
      }
    }
    return;
  }
  const Bf16TilesDest d0 = DestOf(job, g);
  const __mmask16 m0 = FirstLanes(d0.on);
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) _mm512_mask_storeu_ps(d0.y + (r0 + i) * d0.stride + d0.o0, m0, a0[i]);
  if constexpr (kTwo) {
    const Bf16TilesDest d1 = DestOf(job, g + 1);
    const __mmask16 m1 = FirstLanes(d1.on);
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      _mm512_mask_storeu_ps(d1.y + (r0 + i) * d1.stride + d1.o0, m1, a1[i]);
    }
  }
}

// Block<h, kTwo> for panel heights h = 1..kPanelRows, indexed by h - 1.
template <bool kTwo, std::size_t... H>
constexpr auto BlocksByHeight(std::index_sequence<H...>) {
  return std::array{&Block<static_cast<int>(H) + 1, kTwo>...};
}
template <bool kTwo>
constexpr auto kBlocks = BlocksByHeight<kTwo>(std::make_index_sequence<kPanelRows>());

// Weight groups [g_begin, g_end) against every row of x: pass by pass of panels (each pass's
// packed x stays in L2), the groups in pairs against each panel of the pass.
TANDEM_BF16_TARGET void GroupRange(const Bf16TilesJob& job, std::int64_t g_begin,
                                   std::int64_t g_end) {
  const std::int64_t pairs = job.chunks * kPairs;
  const std::int64_t panels = (job.rows + kPanelRows - 1) / kPanelRows;
  const std::int64_t pass_panels = std::max<std::int64_t>(1, kPassBytes / (kPanelRows * pairs * 4));
  const std::int64_t groups = (job.out + kOutputs - 1) / kOutputs;
  // One short panel: the weights stream from memory once, nothing to reuse them from cache.
  const bool prefetch = panels == 1 && job.rows <= 4;
  const auto* xp = static_cast<const std::uint32_t*>(job.xp);
  for (std::int64_t p0 = 0; p0 < panels; p0 += pass_panels) {
    const std::int64_t p1 = std::min(panels, p0 + pass_panels);
    for (std::int64_t g = g_begin; g < g_end; g += 2) {
      const bool two = g + 1 < g_end && g + 1 < groups;
      for (std::int64_t p = p0; p < p1; ++p) {
        const std::int64_t r0 = p * kPanelRows, h = std::min(kPanelRows, job.rows - r0);
        const std::uint32_t* panel = xp + r0 * pairs;
        (two ? kBlocks<true> : kBlocks<false>)[h - 1](job, pairs, panel, r0, g, prefetch);
      }
    }
  }
}

}  // namespace

void Dpbf16MatMulInto(ThreadPool& pool, const float* x, std::int64_t rows, const WeightView& w,
                      std::int64_t hidden, std::span<const std::int64_t> part_rows,
                      std::span<float* const> outputs, float* y) {
  if (rows <= 0 || w.rows <= 0) return;
  const std::int64_t pairs = (w.cols + kTileChunkCols - 1) / kTileChunkCols * kPairs;
  const ScratchPool::Lease xp_lease =
      pool.scratch().Acquire(static_cast<std::size_t>(rows * pairs) * sizeof(std::uint32_t));
  std::uint32_t* const xp = xp_lease.As<std::uint32_t>();
  const std::int64_t groups = (w.rows + kOutputs - 1) / kOutputs;
  const std::int64_t units = (groups + 1) / 2;  // tasks take pairs of groups
  const int tasks = MatMulTasks(pool, rows, w.rows, w.cols, units);
  const std::int64_t panels = (rows + kPanelRows - 1) / kPanelRows;
  const int pack_tasks = static_cast<int>(std::min<std::int64_t>(tasks, panels));
  pool.Run(pack_tasks, [&](int task, int) {
    PackPanels(x, rows, w.cols, pairs, panels * task / pack_tasks, panels * (task + 1) / pack_tasks,
               xp);
  });
  const Bf16TilesJob job = JobOf(xp, rows, w, hidden, part_rows, outputs, y);
  RunGroupPairs(pool, tasks, units, groups,
                [&](std::int64_t g0, std::int64_t g1) { GroupRange(job, g0, g1); });
}

TANDEM_KERNELS_ISA_END
#endif  // TANDEM_SIMD_AVX512
