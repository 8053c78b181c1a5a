#include "amx/amx_matmul.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>

#include "amx/amx_tiles.h"
#include "matmul/bf16_tiles_job.h"
#include "matmul/matmul_tasks.h"
#include "simd/simd_math.h"

#if defined(TANDEM_SIMD_AVX512)
TANDEM_KERNELS_ISA_BEGIN
namespace {

constexpr std::int64_t kTokens = 16;               // rows of x per tile (and of a C tile)
constexpr std::int64_t kChunk = kTileChunkCols;    // bf16 columns per tile row (64 bytes)
constexpr std::int64_t kOutputs = kTileGroupRows;  // outputs per weight tile (C tile columns)
constexpr std::int64_t kBlockElems = kTileGroupRows * kTileChunkCols;  // one 1 KiB weight tile
// x's packed rows per pass over a task's outputs: the pass's packed x stays in L2 (<= 1 MiB)
// while every weight block of the task streams past it.
constexpr std::int64_t kPassBytes = 1 << 20;
// A decode batch streams each weight block from memory once; prefetching this far ahead in the
// stream keeps the tile loads fed (GEMV from memory, 2 threads, on the AVX-512 dev machine:
// 0.93-0.94 of a plain stream read at 2-4 KiB ahead, 1.04-1.08 at 1 KiB, no better at 0.5 or
// 1.5 KiB).
constexpr int kWeightPrefetch = 1024;

// x as bf16 in tiles: [rows / 16][in / 32][16 rows][32 columns] (both padded with zeros), so each
// tile the kernel loads is 1 KiB in one piece, as the weights' tiles are.
TANDEM_AMX_TARGET void PackRows(const float* x, std::int64_t in, std::int64_t chunks,
                                std::int64_t r0, std::int64_t r1, std::uint16_t* xp) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const float* row = x + r * in;
    std::uint16_t* to = xp + (r / kTokens * chunks * kTokens + r % kTokens) * kChunk;
    for (std::int64_t k = 0, c = 0; k < chunks; ++k, c += kChunk) {
      _mm512_storeu_si512(to + k * kBlockElems,
                          Bf16x32(row + c, std::clamp<std::int64_t>(in - c, 0, kChunk)));
    }
  }
}

using Job = Bf16TilesJob;
using Dest = Bf16TilesDest;

// Accumulators (x tile, gate group) and (x tile, up group) of a gated pair to y: SiluMul's own
// arithmetic on the 16 outputs of the pair (same expression, so the same bits as MatMul of the
// pair followed by SiluMul).
TANDEM_AMX_TARGET inline void StoreGated(const Job& job, std::int64_t t0, std::int64_t g,
                                         const float* gate, const float* up) {
  const std::int64_t o0 = g / 2 * kOutputs;
  const std::int64_t on = std::min(kOutputs, job.hidden - o0);
  const __mmask16 m = FirstLanes(on);
  const V16f one = SplatV(1.0f);
  for (std::int64_t t = 0; t < kTokens && t0 + t < job.rows; ++t) {
    const V16f gv = LoadV(gate + t * kOutputs);
    const V16f v = gv / (one + ExpV(-gv)) * LoadV(up + t * kOutputs);
    _mm512_mask_storeu_ps(job.y + (t0 + t) * job.hidden + o0, m,
                          reinterpret_cast<const __m512&>(v));
  }
}

// C tile (token block t0) to its destination, only its rows and outputs that exist.
TANDEM_AMX_TARGET inline void StoreTile(const Job& job, std::int64_t t0, const Dest& d,
                                        const float* c) {
  const std::int64_t tn = std::min(kTokens, job.rows - t0);
  for (std::int64_t t = 0; t < tn; ++t) {
    std::memcpy(d.y + (t0 + t) * d.stride + d.o0, c + t * kOutputs,
                static_cast<std::size_t>(d.on) * sizeof(float));
  }
}

// Lines of the next weights to fetch into L2 while a block computes (a share of the next group
// pair per block of the pair before it), so that the next pair's first block does not wait on
// memory.
struct Lookahead {
  const char* lines = nullptr;
  std::int64_t count = 0;
};

// NX x-tiles (16 rows each, from t0) against NW weight tiles (16 outputs each, from group g), the
// whole reduction chunk by chunk onto zeroed accumulators.
template <int NX, int NW>
TANDEM_AMX_TARGET void Block(const Job& job, std::int64_t t0, std::int64_t g, Lookahead ahead) {
  const std::int64_t ahead_per_chunk = (ahead.count + job.chunks - 1) / job.chunks;
  _tile_zero(0);
  if constexpr (NW == 2) _tile_zero(1);
  if constexpr (NX == 2) _tile_zero(2);
  if constexpr (NX == 2 && NW == 2) _tile_zero(3);
  const std::uint16_t* x0 =
      static_cast<const std::uint16_t*>(job.xp) + t0 / kTokens * job.chunks * kBlockElems;
  const std::uint16_t* x1 = x0 + job.chunks * kBlockElems;
  const std::uint16_t* w0 = job.w + g * job.chunks * kBlockElems;
  const std::uint16_t* w1 = w0 + job.chunks * kBlockElems;
  for (std::int64_t k = 0; k < job.chunks; ++k) {
    const std::uint16_t* wk0 = w0 + k * kBlockElems;
    const std::uint16_t* wk1 = w1 + k * kBlockElems;
    if constexpr (NX == 1) {
      // Decode: the weights stream from memory, a tile's 16 lines ahead of each use.
      for (int l = 0; l < 16; ++l) {
        __builtin_prefetch(reinterpret_cast<const char*>(wk0) + kWeightPrefetch + 64 * l);
        if constexpr (NW == 2) {
          __builtin_prefetch(reinterpret_cast<const char*>(wk1) + kWeightPrefetch + 64 * l);
        }
      }
    }
    for (std::int64_t l = k * ahead_per_chunk, end = std::min(ahead.count, l + ahead_per_chunk);
         l < end; ++l) {
      _mm_prefetch(ahead.lines + 64 * l, _MM_HINT_T1);
    }
    _tile_loadd(4, x0 + k * kBlockElems, 64);
    _tile_loadd(6, wk0, 64);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (NW == 2) {
      _tile_loadd(7, wk1, 64);
      _tile_dpbf16ps(1, 4, 7);
    }
    if constexpr (NX == 2) {
      _tile_loadd(5, x1 + k * kBlockElems, 64);
      _tile_dpbf16ps(2, 5, 6);
      if constexpr (NW == 2) _tile_dpbf16ps(3, 5, 7);
    }
  }
  if (job.hidden > 0) {
    if constexpr (NW == 2) {  // a gated pair's groups come in pairs
      alignas(64) float c[4][kTokens * kOutputs];
      constexpr std::int64_t kStride = kOutputs * sizeof(float);
      _tile_stored(0, c[0], kStride);
      _tile_stored(1, c[1], kStride);
      StoreGated(job, t0, g, c[0], c[1]);
      if constexpr (NX == 2) {
        _tile_stored(2, c[2], kStride);
        _tile_stored(3, c[3], kStride);
        StoreGated(job, t0 + kTokens, g, c[2], c[3]);
      }
    }
    return;
  }
  const Dest d0 = DestOf(job, g);
  const Dest d1 = NW == 2 ? DestOf(job, g + 1) : d0;
  alignas(64) float c[kTokens * kOutputs];
  // Whole tiles go straight to their destination, edge tiles through c. (A macro: GCC's tile
  // intrinsics take the tile's number as a literal.)
#define TANDEM_AMX_STORE(tile, tt, d)                                          \
  if ((tt) + kTokens <= job.rows && (d).on == kOutputs) {                      \
    _tile_stored(tile, (d).y + (tt) * (d).stride + (d).o0,                     \
                 (d).stride * static_cast<std::int64_t>(sizeof(float)));       \
  } else {                                                                     \
    _tile_stored(tile, c, kOutputs* static_cast<std::int64_t>(sizeof(float))); \
    StoreTile(job, tt, d, c);                                                  \
  }
  TANDEM_AMX_STORE(0, t0, d0);
  if constexpr (NW == 2) {
    TANDEM_AMX_STORE(1, t0, d1);
  }
  if constexpr (NX == 2) {
    TANDEM_AMX_STORE(2, t0 + kTokens, d0);
  }
  if constexpr (NX == 2 && NW == 2) {
    TANDEM_AMX_STORE(3, t0 + kTokens, d1);
  }
#undef TANDEM_AMX_STORE
}

// Row groups [g_begin, g_end) of the weights for every row of x: pass by pass of x rows (each
// pass's packed x stays in L2), the weights in pairs of groups against pairs of x tiles.
TANDEM_AMX_TARGET void GroupRange(const Job& job, std::int64_t g_begin, std::int64_t g_end) {
  LoadTileConfig();
  const std::int64_t x_tiles = (job.rows + kTokens - 1) / kTokens;
  const std::int64_t pass_tiles =
      std::max<std::int64_t>(2, kPassBytes / (job.chunks * kBlockElems * 2) / 2 * 2);
  const std::int64_t groups = (job.out + kOutputs - 1) / kOutputs;
  for (std::int64_t p0 = 0; p0 < x_tiles; p0 += pass_tiles) {
    const std::int64_t p1 = std::min(x_tiles, p0 + pass_tiles);
    const std::int64_t blocks_per_pair = (p1 - p0 + 1) / 2;
    for (std::int64_t g = g_begin; g < g_end; g += 2) {
      const bool two_groups = g + 1 < g_end && g + 1 < groups;
      // The next pair's weights, split evenly over this pair's blocks (a decode block instead
      // prefetches ahead in its own stream).
      const std::int64_t next_lines =
          blocks_per_pair > 1 && g + 2 < g_end
              ? std::min<std::int64_t>(2, g_end - g - 2) * job.chunks * kBlockElems * 2 / 64
              : 0;
      const char* next = reinterpret_cast<const char*>(job.w + (g + 2) * job.chunks * kBlockElems);
      for (std::int64_t t = p0, b = 0; t < p1; t += 2, ++b) {
        const bool two_x = t + 1 < p1;
        const std::int64_t l0 = next_lines * b / blocks_per_pair;
        const Lookahead ahead{next + 64 * l0, next_lines * (b + 1) / blocks_per_pair - l0};
        if (two_x && two_groups)
          Block<2, 2>(job, t * kTokens, g, ahead);
        else if (two_x)
          Block<2, 1>(job, t * kTokens, g, ahead);
        else if (two_groups)
          Block<1, 2>(job, t * kTokens, g, ahead);
        else
          Block<1, 1>(job, t * kTokens, g, ahead);
      }
    }
  }
  _tile_release();
}

}  // namespace

void AmxBf16MatMul(ThreadPool& pool, const float* x, std::int64_t rows, const WeightView& w,
                   float* y) {
  AmxBf16MatMulInto(pool, x, rows, w, 0, {}, {}, y);
}

void AmxBf16GatedMatMul(ThreadPool& pool, const float* x, std::int64_t rows, const WeightView& w,
                        std::int64_t hidden, float* y) {
  AmxBf16MatMulInto(pool, x, rows, w, hidden, {}, {}, y);
}

void AmxBf16StackedMatMul(ThreadPool& pool, const float* x, std::int64_t rows, const WeightView& w,
                          std::span<const std::int64_t> part_rows,
                          std::span<float* const> outputs) {
  AmxBf16MatMulInto(pool, x, rows, w, 0, part_rows, outputs, nullptr);
}

void AmxBf16MatMulInto(ThreadPool& pool, const float* x, std::int64_t rows, const WeightView& w,
                       std::int64_t hidden, std::span<const std::int64_t> part_rows,
                       std::span<float* const> outputs, float* y) {
  if (rows <= 0 || w.rows <= 0) return;
  const std::int64_t chunks = (w.cols + kChunk - 1) / kChunk;
  const std::int64_t stride = chunks * kChunk;
  const std::int64_t padded_rows = (rows + kTokens - 1) / kTokens * kTokens;
  const ScratchPool::Lease xp_lease = pool.scratch().Acquire(
      static_cast<std::size_t>(padded_rows * stride) * sizeof(std::uint16_t));
  std::uint16_t* const xp = xp_lease.As<std::uint16_t>();
  if (padded_rows > rows) {  // the last tile's missing rows
    std::memset(xp + (padded_rows - kTokens) * stride, 0,
                static_cast<std::size_t>(kTokens * stride) * sizeof(std::uint16_t));
  }
  const std::int64_t groups = (w.rows + kOutputs - 1) / kOutputs;
  const std::int64_t units = (groups + 1) / 2;  // tasks take pairs of groups
  const int tasks = MatMulTasks(pool, rows, w.rows, w.cols, units);
  const int pack_tasks = static_cast<int>(std::min<std::int64_t>(tasks, rows));
  pool.Run(pack_tasks, [&](int task, int) {
    PackRows(x, w.cols, chunks, rows * task / pack_tasks, rows * (task + 1) / pack_tasks, xp);
  });
  const Bf16TilesJob job = JobOf(xp, rows, w, hidden, part_rows, outputs, y);
  RunGroupPairs(pool, tasks, units, groups,
                [&](std::int64_t g0, std::int64_t g1) { GroupRange(job, g0, g1); });
}

TANDEM_KERNELS_ISA_END
#endif  // TANDEM_SIMD_AVX512
