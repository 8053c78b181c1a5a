#pragma once
// The register tile behind MatMul and attention scores: R input rows against O weight/key rows,
// each of the R x O results being exactly simd.h's canonical Dot() (same chunks, same tail, same
// horizontal-sum tree), so a result never depends on the tile it was computed in. Each loaded
// chunk of a weight row serves all R input rows.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "simd/simd.h"

TANDEM_KERNELS_ISA_BEGIN

// The horizontal sums of a tile's accumulators, each by simd.h's one tree.
template <int R, int O>
__attribute__((always_inline)) inline void StoreTile(const F32x16 (&acc)[R][O], float* out,
                                                     std::int64_t out_stride) {
  if constexpr (R * O >= 8 && R * O <= 16) {  // all at once: the same sums, fewer instructions
    float sums[R * O];
    HorizontalSums<R * O>(reinterpret_cast<const F32x16(&)[R * O]>(acc), sums);
    for (int r = 0; r < R; ++r) {
      for (int o = 0; o < O; ++o) out[r * out_stride + o] = sums[r * O + o];
    }
  } else {
    for (int r = 0; r < R; ++r) {
      for (int o = 0; o < O; ++o) out[r * out_stride + o] = HorizontalSum(acc[r][o]);
    }
  }
}

// acc[r][o] += x_r[k, k + n) * wv[o] for one chunk (n = kLanes: whole; less: the zero-padded
// tail), each loaded input chunk serving all O weight chunks.
template <int R, int O>
__attribute__((always_inline)) inline void FmaRows(F32x16 (&acc)[R][O], const F32x16 (&wv)[O],
                                                   const float* x, std::int64_t x_stride,
                                                   std::int64_t k, int n) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const F32x16 xv =
        n == kLanes ? Load(x + r * x_stride + k) : LoadPartial(x + r * x_stride + k, n);
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) acc[r][o] = Fma(xv, wv[o], acc[r][o]);
  }
}

// Narrow weight rows are prefetched (simd.h, PrefetchRow); float32 rows (weights, attention's
// keys) are left to the hardware prefetchers.
template <typename Row>
inline constexpr bool kPrefetch = !std::is_same_v<Row, const float*>;

#if defined(TANDEM_SIMD_HALF_PASSES)
// Tiles of more than this many F32x16 accumulators run as half passes (simd.h, F32x8).
inline constexpr int kWideTileMax = 4;
// Floats of each row per block of the two passes: the high pass finds the block's R + O rows in
// L1 where the low pass left them (7 rows x 2 KiB for a 4 x 3 tile).
inline constexpr std::int64_t kHalfBlock = 512;

// One half (H: 0 low, 1 high) of chunks [k0, k1) into acc, each loaded input half serving all O
// weight halves: R x O accumulators, O weight halves and one input half fit the 16 registers,
// and each loaded half is loaded once (R + O loads per R x O FMAs).
template <int R, int O, int H, typename LoadW>
__attribute__((always_inline)) inline void HalfPass(F32x8 (&acc)[R][O], const float* x,
                                                    std::int64_t x_stride, std::int64_t k0,
                                                    std::int64_t k1, const LoadW& load_w) {
  F32x8 a[R][O];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) a[r][o] = acc[r][o];
  }
  for (std::int64_t k = k0; k < k1; k += kLanes) {
    F32x8 wv[O];
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) wv[o] = InRegister(load_w(o, k, H));
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const F32x8 xv = InRegister(LoadHalf(x + r * x_stride + k, H));
#pragma GCC unroll 16
      for (int o = 0; o < O; ++o) a[r][o] = FmaHalf(xv, wv[o], a[r][o]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) acc[r][o] = a[r][o];
  }
}

// DotTile's result by half passes over the whole chunks, block by block; the tail chunk runs at
// full width as in DotTile. load_w(o, k, h): half h of weight row o's chunk at k; load_tail(o, k,
// n): that row's zero-padded tail chunk.
template <int R, int O, typename LoadW, typename LoadTail>
inline void HalvesTile(const float* x, std::int64_t x_stride, std::int64_t n, const LoadW& load_w,
                       const LoadTail& load_tail, float* out, std::int64_t out_stride) {
  F32x8 lo[R][O], hi[R][O];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) lo[r][o] = hi[r][o] = ZeroHalf();
  }
  const std::int64_t whole = n / kLanes * kLanes;
  for (std::int64_t k0 = 0; k0 < whole; k0 += kHalfBlock) {
    const std::int64_t k1 = std::min(whole, k0 + kHalfBlock);
    HalfPass<R, O, 0>(lo, x, x_stride, k0, k1, load_w);
    HalfPass<R, O, 1>(hi, x, x_stride, k0, k1, load_w);
  }
  F32x16 acc[R][O];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) acc[r][o] = Join(lo[r][o], hi[r][o]);
  }
  if (whole < n) {
    const int rest = static_cast<int>(n - whole);
    F32x16 wv[O];
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) wv[o] = load_tail(o, whole, rest);
    FmaRows<R, O>(acc, wv, x, x_stride, whole, rest);
  }
  StoreTile<R, O>(acc, out, out_stride);
}
#endif

// out[r * out_stride + o] = Dot(x + r * x_stride, w[o], n) for r < R, o < O. Row: a pointer or
// a row handle of simd.h (F16Row); FP8 rows take DotTileFp8.
template <int R, int O, typename Row>
inline void DotTile(const float* x, std::int64_t x_stride, const Row* w, std::int64_t n, float* out,
                    std::int64_t out_stride) {
#if defined(TANDEM_SIMD_HALF_PASSES)
  if constexpr (R * O > kWideTileMax) {
    auto load_w = [w](int o, std::int64_t k, int h) {
      // The low pass brings each line in; the high pass finds it in L1.
      if constexpr (kPrefetch<Row>) {
        if (h == 0) PrefetchRow(w[o], k);
      }
      return LoadRowHalf(w[o], k, h);
    };
    auto load_tail = [w](int o, std::int64_t k, int rest) { return LoadRowPartial(w[o], k, rest); };
    return HalvesTile<R, O>(x, x_stride, n, load_w, load_tail, out, out_stride);
  }
#endif
  F32x16 acc[R][O];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) acc[r][o] = Zero();
  }
  std::int64_t k = 0;
  for (; k + kLanes <= n; k += kLanes) {
    F32x16 wv[O];
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) {
      if constexpr (kPrefetch<Row>) PrefetchRow(w[o], k);
      wv[o] = LoadRow(w[o], k);
    }
    FmaRows<R, O>(acc, wv, x, x_stride, k, kLanes);
  }
  if (k < n) {
    const int rest = static_cast<int>(n - k);
    F32x16 wv[O];
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) wv[o] = LoadRowPartial(w[o], k, rest);
    FmaRows<R, O>(acc, wv, x, x_stride, k, rest);
  }
  StoreTile<R, O>(acc, out, out_stride);
}

// DotTile for FP8 rows: out[r * out_stride + o] = Dot(x_r, dequantised w[o]), the very sequence
// DotTile runs on the float32 twin (chunk k's weights are fp8 * scale, one rounding, before its
// FMA). Rows are walked one scale block (2^shift columns) at a time so that each row's scale is
// loaded and broadcast once per block rather than per chunk. scale[o][b] covers columns
// [b << shift, (b + 1) << shift) of row o.
template <int R, int O>
inline void DotTileFp8(const float* x, std::int64_t x_stride, const std::uint8_t* const* w,
                       const float* const* scale, int shift, std::int64_t n, float* out,
                       std::int64_t out_stride) {
#if defined(TANDEM_SIMD_HALF_PASSES)
  if constexpr (R * O > kWideTileMax) {
    // The block's scale is looked up per chunk here rather than held per block: R x O
    // accumulators and O weight halves already fill the registers. Same float, same product.
    auto load_w = [w, scale, shift](int o, std::int64_t k, int h) {
      if (h == 0) PrefetchRow(w[o], k);
      return MulHalf(LoadFp8Half(w[o] + k, h), scale[o][k >> shift] * kFp8LoadFactor);
    };
    auto load_tail = [w, scale, shift](int o, std::int64_t k, int rest) {
      return Mul(LoadFp8Partial(w[o] + k, rest), Broadcast(scale[o][k >> shift] * kFp8LoadFactor));
    };
    return HalvesTile<R, O>(x, x_stride, n, load_w, load_tail, out, out_stride);
  }
#endif
  F32x16 acc[R][O];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) acc[r][o] = Zero();
  }
  const std::int64_t whole = n / kLanes * kLanes;
  std::int64_t k = 0;
  for (std::int64_t b = 0; k < whole; ++b) {
    const std::int64_t end = std::min(whole, (b + 1) << shift);
    Bcast s[O];
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) s[o] = Broadcast(scale[o][b] * kFp8LoadFactor);
    for (; k < end; k += kLanes) {
      F32x16 wv[O];
#pragma GCC unroll 16
      for (int o = 0; o < O; ++o) {
        PrefetchRow(w[o], k);
        wv[o] = Mul(LoadFp8(w[o] + k), s[o]);
      }
      FmaRows<R, O>(acc, wv, x, x_stride, k, kLanes);
    }
  }
  if (k < n) {
    const int rest = static_cast<int>(n - k);
    F32x16 wv[O];
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) {
      wv[o] = Mul(LoadFp8Partial(w[o] + k, rest), Broadcast(scale[o][k >> shift] * kFp8LoadFactor));
    }
    FmaRows<R, O>(acc, wv, x, x_stride, k, rest);
  }
  StoreTile<R, O>(acc, out, out_stride);
}

TANDEM_KERNELS_ISA_END
