// How fast this core runs AVX512-BF16's dot product against the float32 FMA, for
// `--bf16-matmul auto`: the instruction is twice the FMA's flops on AMD Zen 4/5 but half of them
// on Intel's Sapphire/Emerald Rapids cores (one every two cycles), where kAvx512Bf16 prefill runs
// at 0.6x kF32's (docs/performance.md, "Which bf16 products auto picks").
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>

#include "tandem/kernels/backend.h"

namespace tandem::kernels {
namespace {

#if defined(__x86_64__) && defined(TANDEM_KERNELS_HAVE_AVX512)
// 14 independent accumulators (more than latency x ports on every core measured), register
// operands only, so the loop times the execution ports and nothing of the memory system. Zeroed
// first: stale register contents can be denormals, which take microcode assists.
#define TANDEM_DOT14(op)                                                 \
  op " %%zmm0, %%zmm1, %%zmm2\n\t" op " %%zmm0, %%zmm1, %%zmm3\n\t" op   \
     " %%zmm0, %%zmm1, %%zmm4\n\t" op " %%zmm0, %%zmm1, %%zmm5\n\t" op   \
     " %%zmm0, %%zmm1, %%zmm6\n\t" op " %%zmm0, %%zmm1, %%zmm7\n\t" op   \
     " %%zmm0, %%zmm1, %%zmm8\n\t" op " %%zmm0, %%zmm1, %%zmm9\n\t" op   \
     " %%zmm0, %%zmm1, %%zmm10\n\t" op " %%zmm0, %%zmm1, %%zmm11\n\t" op \
     " %%zmm0, %%zmm1, %%zmm12\n\t" op " %%zmm0, %%zmm1, %%zmm13\n\t" op \
     " %%zmm0, %%zmm1, %%zmm14\n\t" op " %%zmm0, %%zmm1, %%zmm15\n\t"
// Named as xmm: the names every x86-64 target knows; a clobbered xmm is its whole zmm.
#define TANDEM_CLOBBERED_ZMM                                                               \
  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", \
      "xmm11", "xmm12", "xmm13", "xmm14", "xmm15"

constexpr std::int64_t kIterations = 4096;  // 57,344 instructions: tens of microseconds
constexpr int kRounds = 16;

void ZeroOperands() {
  asm volatile(
      "vpxord %%zmm0, %%zmm0, %%zmm0\n\tvpxord %%zmm1, %%zmm1, %%zmm1\n\t"
      "vmovaps %%zmm0, %%zmm2\n\tvmovaps %%zmm0, %%zmm3\n\tvmovaps %%zmm0, %%zmm4\n\t"
      "vmovaps %%zmm0, %%zmm5\n\tvmovaps %%zmm0, %%zmm6\n\tvmovaps %%zmm0, %%zmm7\n\t"
      "vmovaps %%zmm0, %%zmm8\n\tvmovaps %%zmm0, %%zmm9\n\tvmovaps %%zmm0, %%zmm10\n\t"
      "vmovaps %%zmm0, %%zmm11\n\tvmovaps %%zmm0, %%zmm12\n\tvmovaps %%zmm0, %%zmm13\n\t"
      "vmovaps %%zmm0, %%zmm14\n\tvmovaps %%zmm0, %%zmm15\n\t" ::
          : TANDEM_CLOBBERED_ZMM);
}

// The time of kIterations x 14 VDPBF16PS (kDots) or float32 FMAs.
template <bool kDots>
double Seconds() {
  ZeroOperands();
  const auto start = std::chrono::steady_clock::now();
  for (std::int64_t i = 0; i < kIterations; ++i) {
    if constexpr (kDots) {
      asm volatile(TANDEM_DOT14("vdpbf16ps")::: TANDEM_CLOBBERED_ZMM);
    } else {
      asm volatile(TANDEM_DOT14("vfmadd231ps")::: TANDEM_CLOBBERED_ZMM);
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
#undef TANDEM_DOT14
#undef TANDEM_CLOBBERED_ZMM
#endif

}  // namespace

std::optional<Bf16DotRates> MeasureBf16DotRates() {
#if defined(__x86_64__) && defined(TANDEM_KERNELS_HAVE_AVX512)
  if (!IsAvx512Bf16Available()) return std::nullopt;
  // Alternating and keeping each kind's fastest round: a neighbour that takes the core for a while
  // slows some rounds of both, not the best of either.
  double fma = 1e9, dot = 1e9;
  Seconds<false>();  // warms the core up to its vector clock
  for (int round = 0; round < kRounds; ++round) {
    fma = std::min(fma, Seconds<false>());
    dot = std::min(dot, Seconds<true>());
  }
  constexpr double kInstructions = 14.0 * kIterations;
  // A dot product is 32 lanes' products and sums (64 flops), an FMA 16 lanes' (32).
  return Bf16DotRates{.dot_gflops = kInstructions * 64 / dot / 1e9,
                      .fma_gflops = kInstructions * 32 / fma / 1e9};
#else
  return std::nullopt;
#endif
}

bool Bf16DotsPayOff(const Bf16DotRates& rates) {
  return rates.dot_gflops >= kBf16DotMinSpeedup * rates.fma_gflops;
}

const std::optional<Bf16DotRates>& Bf16DotRatesOfThisCpu() {
  // Measured once per process: every backend of the process then picks the same arithmetic.
  static const std::optional<Bf16DotRates> rates = MeasureBf16DotRates();
  return rates;
}

}  // namespace tandem::kernels
