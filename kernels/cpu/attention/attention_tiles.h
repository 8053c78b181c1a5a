#pragma once
// Register tiles of the fast CPU attention: raw scores (heads x cache rows, via DotTile) and the
// softmax-weighted sums of value rows (heads x 16-float chunks). Every element is computed by the
// same operation sequence whatever tile it falls in, which is what keeps attention batch-invariant
// while the scheduler (attention.cc) regroups heads and tokens freely.
#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "simd/dot_tile.h"
#include "simd/simd.h"

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
constexpr std::array<std::array<DotTileFn, kPosTile>, kHeadTile> TileTable(
    std::index_sequence<H...>) {
  return {TileRow<static_cast<int>(H) + 1>(std::make_index_sequence<kPosTile>())...};
}
inline constexpr auto kDotTiles = TileTable(std::make_index_sequence<kHeadTile>());

// emit(j, t, dot) for every head j < nh and position t in [t_begin, t_end), dot = Dot(q_j,
// key_row(t), n).
template <typename KeyRow, typename Emit>
inline void ForEachDot(const float* q, std::int64_t q_stride, int nh, int t_begin, int t_end,
                       std::int64_t n, KeyRow&& key_row, Emit&& emit) {
  for (int j0 = 0; j0 < nh; j0 += kHeadTile) {
    const int hb = std::min(kHeadTile, nh - j0);
    for (int t0 = t_begin; t0 < t_end; t0 += kPosTile) {
      const int tb = std::min(kPosTile, t_end - t0);
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

// Keys stored transposed by groups of kLanes positions (kt[d * kLanes + p]: element d of the
// group's position p): the scores of R queries (q_stride apart) against the group's positions,
// positions in lanes, one vector per query. Each lane is Dot(q_r, key_p, n) to the bit: lane l of
// Dot's accumulator (element l of every 16-float chunk, FMA'd in chunk order onto zero) is one
// vector chain here, and HorizontalSum's tree (lane l + l+8, then + 4, + 2, + 1) is vector
// additions between chains; no shuffles, and a group's 16 scores come out as one vector where
// DotTile pays a horizontal sum per score. n: a multiple of kLanes.
#if defined(TANDEM_SIMD_AVX512)
constexpr int kTransposedRows = 4;  // 16 chain accumulators + 4 keys + sums of 32 zmm
#else
constexpr int kTransposedRows = 1;  // AVX2: each F32x16 is two of the 16 ymm
#endif
template <int R>
inline void TransposedDots(const float* q, std::int64_t q_stride, const float* kt, std::int64_t n,
                           F32x16 (&out)[R]) {
  F32x16 s2[2][R];  // s2[m][r]: tree level 2 (lanes m and m + 2 of level 4), m = 0, 1
#pragma GCC unroll 2
  for (int m = 0; m < 2; ++m) {
    F32x16 s4[2][R];  // s4[a][r]: level 4 of lane m + 2a (its level-8 lanes and their + 4)
#pragma GCC unroll 2
    for (int a = 0; a < 2; ++a) {
      const int lane = m + 2 * a;
      // The chains of lanes lane, lane + 8, lane + 4, lane + 12.
      constexpr int kOffsets[4] = {0, 8, 4, 12};
      F32x16 acc[4][R];
#pragma GCC unroll 4
      for (int e = 0; e < 4; ++e) {
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[e][r] = Zero();
      }
      for (std::int64_t c = 0; c < n; c += kLanes) {
#pragma GCC unroll 4
        for (int e = 0; e < 4; ++e) {
          const std::int64_t d = c + lane + kOffsets[e];
          const F32x16 k = Load(kt + d * kLanes);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r)
            acc[e][r] = FmaB(Broadcast(q[r * q_stride + d]), k, acc[e][r]);
        }
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        s4[a][r] = Add(Add(acc[0][r], acc[1][r]), Add(acc[2][r], acc[3][r]));
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) s2[m][r] = Add(s4[0][r], s4[1][r]);
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) out[r] = Add(s2[0][r], s2[1][r]);
}

// rows(j)[t] = scale * Dot(q_j, key(t), n) for heads j < nh and positions t in [t0, t1), t0 a
// multiple of kLanes, from keys transposed by groups (kt: group 0's; a group is n * kLanes
// floats).
template <typename RowOf>
inline void TransposedScoreRows(const float* q, std::int64_t q_stride, int nh, const float* kt,
                                int t0, int t1, std::int64_t n, float scale, RowOf&& row_of) {
  const Bcast s = Broadcast(scale);
  for (int j0 = 0; j0 < nh; j0 += kTransposedRows) {
    const int hb = std::min(kTransposedRows, nh - j0);
    for (int t = t0; t < t1; t += kLanes) {
      const float* group = kt + static_cast<std::int64_t>(t / kLanes) * n * kLanes;
      const int lanes = std::min(kLanes, t1 - t);
      F32x16 dots[kTransposedRows];
      auto run = [&]<int R>() {
        F32x16 got[R];
        TransposedDots<R>(q + j0 * q_stride, q_stride, group, n, got);
        for (int r = 0; r < R; ++r) dots[r] = got[r];
      };
      if constexpr (kTransposedRows == 4) {
        switch (hb) {
          case 4:
            run.template operator()<4>();
            break;
          case 3:
            run.template operator()<3>();
            break;
          case 2:
            run.template operator()<2>();
            break;
          default:
            run.template operator()<1>();
            break;
        }
      } else {
        run.template operator()<1>();
      }
      for (int r = 0; r < hb; ++r) {
        const F32x16 scaled = Mul(dots[r], s);
        float* at = row_of(j0 + r) + t;
        if (lanes == kLanes) {
          Store(at, scaled);
        } else {
          StorePartial(at, scaled, lanes);
        }
      }
    }
  }
}

// out_j[d0, d0 + 16 C) (clipped to dim) += sum_{t in [t0, t1)} a_j[t] * value(t)[d] for H heads,
// accumulated in registers in t order, one FMA per term, onto zero (`first`) or onto the sums an
// earlier range of t stored in out: the order behind every output element, whatever H and C and
// however t is split into ranges (a float stored and loaded back is the same float). Each value
// chunk is loaded once for all H heads. kTail: the last chunk is cut by dim; a separate
// instantiation, because with both cases in one loop GCC kept the accumulators in memory and
// stored all H x C of them on every cache row.
template <int H, int C, bool kTail>
void WeightedTile(const float* a, std::int64_t a_stride, const float* const* rows,
                  std::int64_t value_offset, int t0, int t1, bool first, std::int64_t d0,
                  std::int64_t dim, float* out) {
  const int last_width = kTail ? static_cast<int>(dim - d0 - (C - 1) * kLanes) : kLanes;
  F32x16 acc[H][C];
#pragma GCC unroll 4
  for (int j = 0; j < H; ++j) {
    const float* o = out + j * dim + d0;
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      acc[j][c] = first                 ? Zero()
                  : kTail && c == C - 1 ? LoadPartial(o + c * kLanes, last_width)
                                        : Load(o + c * kLanes);
    }
  }
  for (int t = t0; t < t1; ++t) {
    const float* v = rows[t] + value_offset + d0;
    F32x16 vv[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      vv[c] = kTail && c == C - 1 ? LoadPartial(v + c * kLanes, last_width) : Load(v + c * kLanes);
    }
#pragma GCC unroll 4
    for (int j = 0; j < H; ++j) {
      const F32x16 at = Splat(a[j * a_stride + t]);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) acc[j][c] = Fma(at, vv[c], acc[j][c]);
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < H; ++j) {
    float* o = out + j * dim + d0;
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      if (kTail && c == C - 1) {
        StorePartial(o + c * kLanes, acc[j][c], last_width);
      } else {
        Store(o + c * kLanes, acc[j][c]);
      }
    }
  }
}

using WeightedTileFn = void (*)(const float*, std::int64_t, const float* const*, std::int64_t, int,
                                int, bool, std::int64_t, std::int64_t, float*);
template <int H, bool kTail, std::size_t... C>
constexpr std::array<WeightedTileFn, kValueChunkTile> WeightedRow(std::index_sequence<C...>) {
  return {&WeightedTile<H, static_cast<int>(C) + 1, kTail>...};
}
template <bool kTail, std::size_t... H>
constexpr std::array<std::array<WeightedTileFn, kValueChunkTile>, kValueHeadTile> WeightedTable(
    std::index_sequence<H...>) {
  return {
      WeightedRow<static_cast<int>(H) + 1, kTail>(std::make_index_sequence<kValueChunkTile>())...};
}
// [tail][heads - 1][chunks - 1]
inline constexpr std::array<std::array<std::array<WeightedTileFn, kValueChunkTile>, kValueHeadTile>,
                            2>
    kWeightedTiles = {WeightedTable<false>(std::make_index_sequence<kValueHeadTile>()),
                      WeightedTable<true>(std::make_index_sequence<kValueHeadTile>())};

// out_j (+)= sum_{t in [t0, t1)} a_j[t] * value(t)[0, dim) for heads j < nh (a_j = a + j *
// a_stride, out_j = out + j * dim), onto zero when `first`.
inline void WeightedRows(const float* a, std::int64_t a_stride, int nh, const float* const* rows,
                         std::int64_t value_offset, int t0, int t1, bool first, std::int64_t dim,
                         float* out) {
  for (int j0 = 0; j0 < nh; j0 += kValueHeadTile) {
    const int hb = std::min(kValueHeadTile, nh - j0);
    for (std::int64_t d0 = 0; d0 < dim; d0 += kValueChunkTile * kLanes) {
      const std::int64_t chunks =
          std::min<std::int64_t>(kValueChunkTile, (dim - d0 + kLanes - 1) / kLanes);
      const bool tail = dim - d0 < chunks * kLanes;
      kWeightedTiles[tail][hb - 1][chunks - 1](a + j0 * a_stride, a_stride, rows, value_offset, t0,
                                               t1, first, d0, dim, out + j0 * dim);
    }
  }
}

TANDEM_KERNELS_ISA_END
