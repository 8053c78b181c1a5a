#pragma once
// Register tiles of the fast CPU attention: raw scores (heads x cache rows, via DotTile) and the
// softmax-weighted sums of value rows (heads x 16-float chunks). Every element is computed by the
// same operation sequence whatever tile it falls in, which is what keeps attention batch-invariant
// while the scheduler (attention.cc) regroups heads and tokens freely.
#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "dot_tile.h"
#include "simd.h"

TANDEM_KERNELS_ISA_BEGIN

// Tiles of raw scores: H heads' queries (q_stride apart) against T cache rows (dot_tile.h), each
// key chunk loaded once for all H heads, H x T independent accumulators in flight.
constexpr int kHeadTile = 4;
#if defined(TANDEM_SIMD_AVX512)
constexpr int kPosTile = 4;
constexpr int kValueHeadTile = 4;  // weighted sum: heads x 16-float chunks per register tile
constexpr int kValueChunkTile = 4;
#elif defined(TANDEM_SIMD_HALF_PASSES)
constexpr int kPosTile = 2;  // 4 x 2 score tiles run as half passes (dot_tile.h)
// AVX2: 2 heads x 2 chunks of F32x16 = 8 ymm accumulators + 4 value + 1 weight; at 2 x 4 every
// ymm was an accumulator and GCC spilled all sixteen to the stack on every cache row.
constexpr int kValueHeadTile = 2;
constexpr int kValueChunkTile = 2;
#else
constexpr int kPosTile = 2;
constexpr int kValueHeadTile = 2;
constexpr int kValueChunkTile = 4;
#endif
using TileOut = float[kHeadTile][kPosTile];

template <int H, int T>
void ScoreTile(const float* q, std::int64_t q_stride, const float* const* k, std::int64_t n,
               TileOut& out) {
  DotTile<H, T>(q, q_stride, k, n, &out[0][0], kPosTile);
}

using DotTileFn = void (*)(const float*, std::int64_t, const float* const*, std::int64_t, TileOut&);

template <int H, std::size_t... T>
constexpr std::array<DotTileFn, kPosTile> TileRow(std::index_sequence<T...>) {
  return {&ScoreTile<H, static_cast<int>(T) + 1>...};
}
template <std::size_t... H>
constexpr std::array<std::array<DotTileFn, kPosTile>, kHeadTile> TileTable(std::index_sequence<H...>) {
  return {TileRow<static_cast<int>(H) + 1>(std::make_index_sequence<kPosTile>())...};
}
inline constexpr auto kDotTiles = TileTable(std::make_index_sequence<kHeadTile>());

// emit(j, t, dot) for every head j < nh and position t < ctx, dot = Dot(q_j, key_row(t), n).
template <typename KeyRow, typename Emit>
inline void ForEachDot(const float* q, std::int64_t q_stride, int nh, int ctx, std::int64_t n,
                KeyRow&& key_row, Emit&& emit) {
  for (int j0 = 0; j0 < nh; j0 += kHeadTile) {
    const int hb = std::min(kHeadTile, nh - j0);
    for (int t0 = 0; t0 < ctx; t0 += kPosTile) {
      const int tb = std::min(kPosTile, ctx - t0);
      const float* k[kPosTile];
      for (int u = 0; u < tb; ++u) k[u] = key_row(t0 + u);
      TileOut out;
      kDotTiles[hb - 1][tb - 1](q + j0 * q_stride, q_stride, k, n, out);
      for (int j = 0; j < hb; ++j) {
        for (int u = 0; u < tb; ++u) emit(j0 + j, t0 + u, out[j][u]);
      }
    }
  }
}

// out_j[d0, d0 + 16 C) (clipped to dim) = sum_t a_j[t] * value(t)[d] for H heads, accumulated in
// registers in t order, one FMA per term, starting from zero: the order behind every output
// element, whatever H and C. Each value chunk is loaded once for all H heads.
template <int H, int C>
void WeightedTile(const float* a, std::int64_t a_stride, const float* const* rows,
                  std::int64_t value_offset, int ctx, std::int64_t d0, std::int64_t dim, float* out) {
  F32x16 acc[H][C];
#pragma GCC unroll 4
  for (int j = 0; j < H; ++j) {
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) acc[j][c] = Zero();
  }
  const int last_width =
      static_cast<int>(std::min<std::int64_t>(kLanes, dim - d0 - (C - 1) * kLanes));
  for (int t = 0; t < ctx; ++t) {
    const float* v = rows[t] + value_offset + d0;
    F32x16 vv[C];
#pragma GCC unroll 4
    for (int c = 0; c < C - 1; ++c) vv[c] = Load(v + c * kLanes);
    vv[C - 1] = last_width == kLanes ? Load(v + (C - 1) * kLanes)
                                     : LoadPartial(v + (C - 1) * kLanes, last_width);
#pragma GCC unroll 4
    for (int j = 0; j < H; ++j) {
      const F32x16 at = Splat(a[j * a_stride + t]);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) acc[j][c] = Fma(at, vv[c], acc[j][c]);
    }
  }
  for (int j = 0; j < H; ++j) {
    float* o = out + j * dim + d0;
    for (int c = 0; c < C - 1; ++c) Store(o + c * kLanes, acc[j][c]);
    if (last_width == kLanes) {
      Store(o + (C - 1) * kLanes, acc[j][C - 1]);
    } else {
      StorePartial(o + (C - 1) * kLanes, acc[j][C - 1], last_width);
    }
  }
}

using WeightedTileFn = void (*)(const float*, std::int64_t, const float* const*, std::int64_t, int,
                                std::int64_t, std::int64_t, float*);
template <int H, std::size_t... C>
constexpr std::array<WeightedTileFn, kValueChunkTile> WeightedRow(std::index_sequence<C...>) {
  return {&WeightedTile<H, static_cast<int>(C) + 1>...};
}
template <std::size_t... H>
constexpr std::array<std::array<WeightedTileFn, kValueChunkTile>, kValueHeadTile> WeightedTable(
    std::index_sequence<H...>) {
  return {WeightedRow<static_cast<int>(H) + 1>(std::make_index_sequence<kValueChunkTile>())...};
}
inline constexpr auto kWeightedTiles = WeightedTable(std::make_index_sequence<kValueHeadTile>());

// out_j = sum_t a_j[t] * value(t)[0, dim) for heads j < nh (a_j = a + j * ctx, out_j = out + j * dim).
inline void WeightedRows(const float* a, int nh, const float* const* rows, std::int64_t value_offset,
                  int ctx, std::int64_t dim, float* out) {
  for (int j0 = 0; j0 < nh; j0 += kValueHeadTile) {
    const int hb = std::min(kValueHeadTile, nh - j0);
    for (std::int64_t d0 = 0; d0 < dim; d0 += kValueChunkTile * kLanes) {
      const std::int64_t chunks =
          std::min<std::int64_t>(kValueChunkTile, (dim - d0 + kLanes - 1) / kLanes);
      kWeightedTiles[hb - 1][chunks - 1](a + static_cast<std::int64_t>(j0) * ctx, ctx, rows,
                                         value_offset, ctx, d0, dim, out + j0 * dim);
    }
  }
}

TANDEM_KERNELS_ISA_END
