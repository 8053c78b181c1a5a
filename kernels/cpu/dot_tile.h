#pragma once
// The register tile behind MatMul and attention scores: R input rows against O weight/key rows,
// each of the R x O results being exactly simd.h's canonical Dot() (same chunks, same tail, same
// horizontal-sum tree), so a result never depends on the tile it was computed in. Each loaded
// chunk of a weight row serves all R input rows.
#include <cstdint>

#include "simd.h"

namespace tandem::kernels::cpu {

// out[r * out_stride + o] = Dot(x + r * x_stride, w[o], n) for r < R, o < O. Row: a pointer or
// a row handle of simd.h (F16Row, Fp8Row).
template <int R, int O, typename Row>
inline void DotTile(const float* x, std::int64_t x_stride, const Row* w, std::int64_t n,
                    float* out, std::int64_t out_stride) {
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
    for (int o = 0; o < O; ++o) wv[o] = LoadRow(w[o], k);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const F32x16 xv = Load(x + r * x_stride + k);
#pragma GCC unroll 16
      for (int o = 0; o < O; ++o) acc[r][o] = Fma(xv, wv[o], acc[r][o]);
    }
  }
  if (k < n) {
    const int rest = static_cast<int>(n - k);
    F32x16 wv[O];
#pragma GCC unroll 16
    for (int o = 0; o < O; ++o) wv[o] = LoadRowPartial(w[o], k, rest);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const F32x16 xv = LoadPartial(x + r * x_stride + k, rest);
#pragma GCC unroll 16
      for (int o = 0; o < O; ++o) acc[r][o] = Fma(xv, wv[o], acc[r][o]);
    }
  }
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

}  // namespace tandem::kernels::cpu
