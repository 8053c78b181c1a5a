#pragma once
// Vectorised exp for softmax and SiLU, written with GCC vector extensions so one definition serves
// every ISA (zmm, ymm pairs, or scalar lanes). Cephes' single-precision scheme: exp(x) =
// 2^n * p(r) with r = x - n ln2 split in two constants so that n * kLn2Hi is exact without FMA
// (the kernels build with -ffp-contract=off). About 2 ulp from std::exp over the clamped range;
// inputs below -87.3 give 0 (std::exp gives a value below 1e-38 there), above 88.7 are clamped.
#include <cstdint>
#include <cstring>

#include "simd/isa.h"

// These are inline helpers, never an ABI boundary; GCC warns about passing 64-byte vectors by
// value when the build lacks AVX-512.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

TANDEM_KERNELS_ISA_BEGIN

typedef float V16f __attribute__((vector_size(64)));
typedef std::int32_t V16i __attribute__((vector_size(64)));

// The lanes of v summed in HorizontalSum's tree (i + i+8, then +4, +2, +1).
inline float SumLanes(V16f v) {
  for (int width = 8; width >= 1; width /= 2) {
    for (int i = 0; i < width; ++i) v[i] += v[i + width];
  }
  return v[0];
}

inline V16f SplatV(float a) { return V16f{} + a; }

inline V16f LoadV(const float* p) {
  V16f v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void StoreV(float* p, V16f v) { std::memcpy(p, &v, sizeof(v)); }

inline V16f ExpV(V16f x) {
  const V16i underflow = x < SplatV(-87.33654f);
  x = x > SplatV(88.37626f) ? SplatV(88.37626f) : x;
  x = underflow ? SplatV(0.0f) : x;  // keeps 2^n representable; those lanes are zeroed below
  // n = round(x / ln2): adding and subtracting 1.5 * 2^23 rounds to nearest.
  const V16f magic = SplatV(12582912.0f);
  const V16f n = (x * SplatV(1.44269504088896341f) + magic) - magic;
  V16f r = x - n * SplatV(0.693359375f);
  r = r - n * SplatV(-2.12194440e-4f);
  V16f p = SplatV(1.9875691500e-4f);
  p = p * r + SplatV(1.3981999507e-3f);
  p = p * r + SplatV(8.3334519073e-3f);
  p = p * r + SplatV(4.1665795894e-2f);
  p = p * r + SplatV(1.6666665459e-1f);
  p = p * r + SplatV(5.0000001201e-1f);
  p = p * (r * r) + r + SplatV(1.0f);
  const V16i bits = (__builtin_convertvector(n, V16i) + 127) << 23;
  V16f scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  const V16f result = p * scale;
  return underflow ? SplatV(0.0f) : result;
}

// exp of one float through the same lanes, for tails: the result equals lane 0 of ExpV.
inline float ExpScalar(float x) {
  V16f v = SplatV(x);
  return ExpV(v)[0];
}

// Softmax numerators in place: scores[t] <- exp(scores[t] - max); returns their sum. Whole chunks
// go through ExpV, the tail through one more ExpV (bit-equal per element to ExpScalar), the sum in
// a fixed order.
inline float ExpAndSum(float* scores, int n) {
  constexpr int kW = 16;
  float mx = -__builtin_inff();
  int t = 0;
  if (n >= kW) {
    V16f m = LoadV(scores);
    for (t = kW; t + kW <= n; t += kW) {
      const V16f v = LoadV(scores + t);
      m = m > v ? m : v;
    }
    for (int i = 0; i < kW; ++i) mx = mx > m[i] ? mx : m[i];
  }
  for (; t < n; ++t) mx = mx > scores[t] ? mx : scores[t];

  V16f acc{};
  const V16f mxv = SplatV(mx);
  for (t = 0; t + kW <= n; t += kW) {
    const V16f e = ExpV(LoadV(scores + t) - mxv);
    StoreV(scores + t, e);
    acc += e;
  }
  float sum = SumLanes(acc);
  if (t < n) {
    // The tail in one vector (a lane of ExpV is ExpScalar of it: same bits as one call per
    // element, at the price of one), added in order as before.
    const int left = n - t;
    V16f tail{};
    for (int i = 0; i < left; ++i) tail[i] = scores[t + i] - mx;
    const V16f e = ExpV(tail);
    for (int i = 0; i < left; ++i) {
      scores[t + i] = e[i];
      sum += e[i];
    }
  }
  return sum;
}

TANDEM_KERNELS_ISA_END

#pragma GCC diagnostic pop
