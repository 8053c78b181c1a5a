#pragma once
// A fixed 16-lane float vector for the fast CPU kernels. Every reduction is written against it, so
// the floating-point operation order behind an output element is a property of the build alone:
// the same lanes, the same accumulator and the same horizontal-sum tree whatever the batch shape,
// tile or thread. The ISA only changes how the 16 lanes are held (one zmm, two ymm, or an array).
//
// The kernels are compiled with -ffp-contract=off so the compiler never fuses (or not) a multiply
// and an add differently in two copies of the same computation; fusing is explicit via Fma().
#include <cstdint>
#include <cstring>

#include "simd/isa.h"
#include "tandem/kernels/dtype.h"

TANDEM_KERNELS_ISA_BEGIN

inline constexpr int kLanes = 16;

#if defined(TANDEM_SIMD_AVX512)

struct F32x16 {
  __m512 v;
};
inline F32x16 Zero() { return {_mm512_setzero_ps()}; }
inline F32x16 Splat(float a) { return {_mm512_set1_ps(a)}; }
inline F32x16 Load(const float* p) { return {_mm512_loadu_ps(p)}; }
inline F32x16 Load(const std::uint16_t* p) {  // bf16 -> f32 is a 16-bit shift
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return {_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))};
}
inline void Store(float* p, F32x16 a) { _mm512_storeu_ps(p, a.v); }
// The first n (< 16) lanes from p, zeros elsewhere; memory past p + n is never touched.
inline __mmask16 FirstLanes(int n) { return static_cast<__mmask16>((1u << n) - 1); }
inline F32x16 LoadPartial(const float* p, int n) {
  return {_mm512_maskz_loadu_ps(FirstLanes(n), p)};
}
#define TANDEM_SIMD_HAS_BF16_PARTIAL 1
inline F32x16 LoadPartial(const std::uint16_t* p, int n) {
  const __m256i h = _mm256_maskz_loadu_epi16(FirstLanes(n), p);
  return {_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))};
}
inline void StorePartial(float* p, F32x16 a, int n) {
  _mm512_mask_storeu_ps(p, FirstLanes(n), a.v);
}
#define TANDEM_SIMD_HAS_F16C 1
inline F32x16 HalvesToF32(__m256i h) { return {_mm512_cvtph_ps(h)}; }
inline F32x16 Fma(F32x16 a, F32x16 b, F32x16 c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
inline F32x16 Mul(F32x16 a, F32x16 b) { return {_mm512_mul_ps(a.v, b.v)}; }
// One float broadcast to every lane, held once (on AVX2 one ymm rather than the two of a Splat).
struct Bcast {
  __m512 v;
};
inline Bcast Broadcast(float a) { return {_mm512_set1_ps(a)}; }
inline F32x16 Mul(F32x16 a, Bcast b) { return {_mm512_mul_ps(a.v, b.v)}; }
inline F32x16 FmaB(Bcast a, F32x16 b, F32x16 c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
inline F32x16 Add(F32x16 a, F32x16 b) { return {_mm512_add_ps(a.v, b.v)}; }
inline void Halves(F32x16 a, __m256* lo, __m256* hi) {
  *lo = _mm512_castps512_ps256(a.v);
  *hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a.v), 1));
}

#elif defined(TANDEM_SIMD_AVX2)

struct F32x16 {
  __m256 lo, hi;
};
inline F32x16 Zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
inline F32x16 Splat(float a) { return {_mm256_set1_ps(a), _mm256_set1_ps(a)}; }
inline F32x16 Load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
inline __m256 Bf16x8(const std::uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline F32x16 Load(const std::uint16_t* p) { return {Bf16x8(p), Bf16x8(p + 8)}; }
inline void Store(float* p, F32x16 a) {
  _mm256_storeu_ps(p, a.lo);
  _mm256_storeu_ps(p + 8, a.hi);
}
// Masks of the first n lanes: lane i of the 8 ints loaded from kLaneMask + 16 - n is set iff
// i < n; the high half (lanes 8..15) is the same with n - 8.
inline constexpr std::int32_t kLaneMask[32] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                               -1, -1, -1, -1, -1, 0,  0,  0,  0,  0,  0,
                                               0,  0,  0,  0,  0,  0,  0,  0,  0,  0};
inline __m256i MaskLo(int n) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLaneMask + 16 - n));
}
inline __m256i MaskHi(int n) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLaneMask + 24 - n));
}
inline F32x16 LoadPartial(const float* p, int n) {
  return {_mm256_maskload_ps(p, MaskLo(n)), _mm256_maskload_ps(p + 8, MaskHi(n))};
}
inline void StorePartial(float* p, F32x16 a, int n) {
  _mm256_maskstore_ps(p, MaskLo(n), a.lo);
  _mm256_maskstore_ps(p + 8, MaskHi(n), a.hi);
}
inline F32x16 Fma(F32x16 a, F32x16 b, F32x16 c) {
  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
inline F32x16 Mul(F32x16 a, F32x16 b) {
  return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)};
}
struct Bcast {
  __m256 v;
};
inline Bcast Broadcast(float a) { return {_mm256_set1_ps(a)}; }
inline F32x16 Mul(F32x16 a, Bcast b) {
  return {_mm256_mul_ps(a.lo, b.v), _mm256_mul_ps(a.hi, b.v)};
}
inline F32x16 FmaB(Bcast a, F32x16 b, F32x16 c) {
  return {_mm256_fmadd_ps(a.v, b.lo, c.lo), _mm256_fmadd_ps(a.v, b.hi, c.hi)};
}
inline F32x16 Add(F32x16 a, F32x16 b) {
  return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)};
}
inline void Halves(F32x16 a, __m256* lo, __m256* hi) {
  *lo = a.lo;
  *hi = a.hi;
}
#define TANDEM_SIMD_HAS_F16C 1
inline F32x16 HalvesToF32(__m256i h) {
  return {_mm256_cvtph_ps(_mm256_castsi256_si128(h)),
          _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1))};
}

// Half chunks: lanes [8h, 8h + 8) of the chunk at p, exactly as the matching full load gives them.
// With sixteen ymm registers an R x O tile of F32x16 accumulators (2RO ymm) leaves none for the
// loads once RO > 4; dot_tile.h then runs the two halves as separate passes of RO ymm each. The
// lanes never mix before the horizontal sum, so each lane's FMA sequence, and the bits, stay the
// same.
#define TANDEM_SIMD_HALF_PASSES 1
using F32x8 = __m256;
inline F32x8 ZeroHalf() { return _mm256_setzero_ps(); }
inline F32x8 LoadHalf(const float* p, int h) { return _mm256_loadu_ps(p + 8 * h); }
inline F32x8 LoadHalf(const std::uint16_t* p, int h) { return Bf16x8(p + 8 * h); }  // bf16
inline F32x8 LoadF16Half(const std::uint16_t* p, int h) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8 * h)));
}
// LoadFp8's widening on 8 bytes (see there).
inline F32x8 LoadFp8Half(const std::uint8_t* p, int h) {
  const __m128i b = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * h)));
  return _mm256_cvtph_ps(_mm_and_si128(_mm_slli_epi16(b, 7), _mm_set1_epi16(-0x4001)));
}
inline F32x8 FmaHalf(F32x8 a, F32x8 b, F32x8 c) { return _mm256_fmadd_ps(a, b, c); }
// a, held in a register. Left alone, GCC folds a loaded half into every FMA that uses it as a
// memory operand (R or O loads of the same data instead of one); measured on a 4 x 3 tile, pinning
// the loads gave 1.4x the GFLOP/s.
inline F32x8 InRegister(F32x8 a) {
  __asm__("" : "+x"(a));
  return a;
}
inline F32x8 MulHalf(F32x8 a, float b) { return _mm256_mul_ps(a, _mm256_set1_ps(b)); }
inline F32x16 Join(F32x8 lo, F32x8 hi) { return {lo, hi}; }

#else  // portable fallback: same lanes, same tree; multiply and add are separate operations here

struct F32x16 {
  float l[kLanes];
};
inline F32x16 Zero() { return {}; }
inline F32x16 Splat(float a) {
  F32x16 r;
  for (float& x : r.l) x = a;
  return r;
}
inline F32x16 Load(const float* p) {
  F32x16 r;
  std::memcpy(r.l, p, sizeof(r.l));
  return r;
}
inline F32x16 Load(const std::uint16_t* p) {
  F32x16 r;
  for (int i = 0; i < kLanes; ++i) {
    const std::uint32_t u = static_cast<std::uint32_t>(p[i]) << 16;
    std::memcpy(&r.l[i], &u, 4);
  }
  return r;
}
inline void Store(float* p, F32x16 a) { std::memcpy(p, a.l, sizeof(a.l)); }
inline F32x16 LoadPartial(const float* p, int n) {
  F32x16 r{};
  std::memcpy(r.l, p, n * sizeof(float));
  return r;
}
inline void StorePartial(float* p, F32x16 a, int n) { std::memcpy(p, a.l, n * sizeof(float)); }
inline F32x16 Fma(F32x16 a, F32x16 b, F32x16 c) {
  for (int i = 0; i < kLanes; ++i) c.l[i] += a.l[i] * b.l[i];
  return c;
}
inline F32x16 Mul(F32x16 a, F32x16 b) {
  for (int i = 0; i < kLanes; ++i) a.l[i] *= b.l[i];
  return a;
}
struct Bcast {
  float v;
};
inline Bcast Broadcast(float a) { return {a}; }
inline F32x16 Mul(F32x16 a, Bcast b) {
  for (float& x : a.l) x *= b.v;
  return a;
}
// c + a * b lane by lane: one FMA (two roundings in the generic copy, like Fma).
inline F32x16 FmaB(Bcast a, F32x16 b, F32x16 c) {
  for (int i = 0; i < kLanes; ++i) c.l[i] += a.v * b.l[i];
  return c;
}
inline F32x16 Add(F32x16 a, F32x16 b) {
  for (int i = 0; i < kLanes; ++i) a.l[i] += b.l[i];
  return a;
}

#endif

#if !defined(TANDEM_SIMD_HAS_BF16_PARTIAL)
inline F32x16 LoadPartial(const std::uint16_t* p, int n) {
  std::uint16_t padded[kLanes] = {};
  std::memcpy(padded, p, n * sizeof(std::uint16_t));
  return Load(padded);
}
#endif

// F16 and FP8 weights. Both widen to float32 exactly, so a converted chunk holds the very floats a
// float32 copy of the weights would, and the FMAs below see the same operands either way.
#if defined(TANDEM_SIMD_HAS_F16C)
inline F32x16 LoadF16(const std::uint16_t* p) {
  return HalvesToF32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
// e4m3 as binary16 bits: sign-extending the byte and shifting it left by 7 puts e4m3's sign at
// bit 15 and its exponent and mantissa in the half's low exponent and high mantissa bits; a
// negative byte's extension also sets bit 14, which the mask clears. The half's exponent bias
// (15) is 8 above e4m3's (7), so the result is the e4m3 value / 256, exactly, subnormals included
// (vcvtph2ps widens those too); kFp8LoadFactor puts the 256 back into the block scale (a power
// of two: no rounding).
inline F32x16 LoadFp8(const std::uint8_t* p) {
  const __m256i b = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return HalvesToF32(_mm256_and_si256(_mm256_slli_epi16(b, 7), _mm256_set1_epi16(-0x4001)));
}
inline constexpr float kFp8LoadFactor = 256.0f;
#else
inline F32x16 LoadF16(const std::uint16_t* p) {
  float f[kLanes];
  for (int i = 0; i < kLanes; ++i) f[i] = F16ToF32(p[i]);
  return Load(f);
}
inline F32x16 LoadFp8(const std::uint8_t* p) {
  float f[kLanes];
  for (int i = 0; i < kLanes; ++i) f[i] = Fp8E4M3ToF32(p[i]);
  return Load(f);
}
inline constexpr float kFp8LoadFactor = 1.0f;
#endif
// 32 e4m3 values as two LoadFp8 results, with one widening of all 32 bytes where the registers
// are wide enough: the same bits per lane.
inline void LoadFp8x32(const std::uint8_t* p, F32x16 (&out)[2]) {
#if defined(TANDEM_SIMD_AVX512)
  const __m512i b = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  const __m512i h = _mm512_and_si512(_mm512_slli_epi16(b, 7), _mm512_set1_epi16(-0x4001));
  out[0] = HalvesToF32(_mm512_castsi512_si256(h));
  out[1] = HalvesToF32(_mm512_extracti64x4_epi64(h, 1));
#else
  out[0] = LoadFp8(p);
  out[1] = LoadFp8(p + kLanes);
#endif
}
inline F32x16 LoadF16Partial(const std::uint16_t* p, int n) {
  std::uint16_t padded[kLanes] = {};
  std::memcpy(padded, p, n * sizeof(std::uint16_t));
  return LoadF16(padded);
}
inline F32x16 LoadFp8Partial(const std::uint8_t* p, int n) {
  std::uint8_t padded[kLanes] = {};
  std::memcpy(padded, p, n);
  return LoadFp8(padded);
}

// Weight rows as DotTile reads them: a plain pointer (float32, bf16) or a row of another dtype.
struct F16Row {
  const std::uint16_t* p;
};
template <typename T>
inline F32x16 LoadRow(const T* p, std::int64_t k) {
  return Load(p + k);
}
template <typename T>
inline F32x16 LoadRowPartial(const T* p, std::int64_t k, int n) {
  return LoadPartial(p + k, n);
}
inline F32x16 LoadRow(F16Row r, std::int64_t k) { return LoadF16(r.p + k); }
// Software prefetch this far ahead in each weight row. The hardware prefetchers keep up with a
// float32 row (one new line per chunk), but narrower rows start a line only every 2 (16-bit) or
// 4 (FP8) chunks, and a GEMV streaming 8 of them then leaves memory idle; measured on the dev
// machine, FP8 GEMV went from about 0.5 to 0.7 of a plain stream read with it.
inline constexpr int kPrefetchBytes = 1024;
template <typename T>
inline void PrefetchRow(const T* p, std::int64_t k) {
  __builtin_prefetch(reinterpret_cast<const char*>(p + k) + kPrefetchBytes);
}
inline void PrefetchRow(F16Row r, std::int64_t k) { PrefetchRow(r.p, k); }
inline F32x16 LoadRowPartial(F16Row r, std::int64_t k, int n) { return LoadF16Partial(r.p + k, n); }
#if defined(TANDEM_SIMD_HALF_PASSES)
template <typename T>
inline F32x8 LoadRowHalf(const T* p, std::int64_t k, int h) {
  return LoadHalf(p + k, h);
}
inline F32x8 LoadRowHalf(F16Row r, std::int64_t k, int h) { return LoadF16Half(r.p + k, h); }
#endif

// The one horizontal-sum tree: lane i + lane i+8, then +4, +2, +1.
inline float HorizontalSum(F32x16 a) {
#if defined(TANDEM_SIMD_AVX512) || defined(TANDEM_SIMD_AVX2)
  __m256 lo, hi;
  Halves(a, &lo, &hi);
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
  return _mm_cvtss_f32(s1);
#else
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int i = 0; i < width; ++i) a.l[i] += a.l[i + width];
  }
  return a.l[0];
#endif
}

// HorizontalSum of N <= 16 accumulators at once (missing ones count as zero): per accumulator the
// very same additions (lane i + i+8, +4, +2, +1; IEEE addition is commutative), but each level
// adds lanes of several accumulators in one instruction after a shuffle. out[i] = sum of acc[i].
template <int N>
__attribute__((always_inline)) inline void HorizontalSums(const F32x16 (&acc)[N], float* out) {
  static_assert(N >= 1 && N <= 16);
#if defined(TANDEM_SIMD_AVX512)
  // Slot j feeds accumulator Slot(j) so that the shuffles below leave sum i in lane i.
  auto slot = [&](int j) {
    const int i = 4 * (j % 4) + j / 4;
    return i < N ? acc[i].v : _mm512_setzero_ps();
  };
  __m512 quarter[4];  // quarter[q], 128-bit lane k: s4 of slot 4q + k
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    __m512 pair[2];  // s8 of two slots: lanes 0-7 and 8-15
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512 a = slot(4 * q + 2 * h), b = slot(4 * q + 2 * h + 1);
      pair[h] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
    }
    quarter[q] = _mm512_add_ps(_mm512_shuffle_f32x4(pair[0], pair[1], 0x88),
                               _mm512_shuffle_f32x4(pair[0], pair[1], 0xDD));
  }
  __m512 s2[2];  // 128-bit lane k: s2 of slots k, 4 + k (s2[0]) or 8 + k, 12 + k (s2[1])
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m512 p = quarter[2 * h], q = quarter[2 * h + 1];
    s2[h] = _mm512_add_ps(_mm512_shuffle_ps(p, q, _MM_SHUFFLE(1, 0, 1, 0)),
                          _mm512_shuffle_ps(p, q, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // 128-bit lane k, element m: the sum of slot 4m + k, i.e. of accumulator 4k + m.
  const __m512 s1 = _mm512_add_ps(_mm512_shuffle_ps(s2[0], s2[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_ps(s2[0], s2[1], _MM_SHUFFLE(3, 1, 3, 1)));
  if constexpr (N == 16) {
    _mm512_storeu_ps(out, s1);
  } else {
    _mm512_mask_storeu_ps(out, static_cast<__mmask16>((1u << N) - 1), s1);
  }
#else
  for (int i = 0; i < N; ++i) out[i] = HorizontalSum(acc[i]);
#endif
}

inline float ToF32(float v) { return v; }
inline float ToF32(std::uint16_t v) {
  const std::uint32_t u = static_cast<std::uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The canonical dot product: whole 16-lane chunks, then the zero-padded tail chunk, into one
// accumulator; then the horizontal-sum tree. MatMul tiles reproduce exactly this sequence.
template <typename W>
inline float Dot(const float* x, const W* w, std::int64_t n) {
  F32x16 acc = Zero();
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) acc = Fma(Load(x + i), Load(w + i), acc);
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    acc = Fma(LoadPartial(x + i, rest), LoadPartial(w + i, rest), acc);
  }
  return HorizontalSum(acc);
}

TANDEM_KERNELS_ISA_END
