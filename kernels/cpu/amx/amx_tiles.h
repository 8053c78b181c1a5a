#pragma once
// What the AMX kernels (amx_matmul.cc, amx_attention.cc) share: their target and the tile
// configuration. The AVX-512 copy only.
#include <cstdint>

#include "matmul/bf16_tiles_job.h"
#include "simd/isa.h"

#if defined(TANDEM_SIMD_AVX512)
TANDEM_KERNELS_ISA_BEGIN

// The AVX-512 copy's target plus the tile instructions and the bf16 conversion. Lambdas get no
// target of their own, so every function that uses these instructions is a named one.
#define TANDEM_AMX_TARGET                                                            \
  __attribute__((                                                                    \
      target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,amx-tile," \
             "amx-bf16")))

// ldtilecfg's 64-byte operand, palette 1.
struct alignas(64) AmxTileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t tile_rows[16] = {};
};

// Every kernel uses tiles 0-7 as 16 rows x 64 bytes: a float32 accumulator of 16 x 16, or a bf16
// operand of 16 x 32 (row-major for the first operand, column pairs for the second). The
// configuration is per thread: each task loads it and releases the tiles when done.
TANDEM_AMX_TARGET inline void LoadTileConfig() {
  AmxTileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.tile_rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
}

// The same of p[0, n) x scale (each product rounded to float32 first, as a separate pass would).
TANDEM_AMX_TARGET inline __m512i ScaledBf16x32(const float* p, std::int64_t n, __m512 scale) {
  const __m512bh v =
      _mm512_cvtne2ps_pbh(_mm512_mul_ps(_mm512_maskz_loadu_ps(FirstLanes(n - 16), p + 16), scale),
                          _mm512_mul_ps(_mm512_maskz_loadu_ps(FirstLanes(n), p), scale));
  return reinterpret_cast<const __m512i&>(v);
}

TANDEM_KERNELS_ISA_END
#endif  // TANDEM_SIMD_AVX512
