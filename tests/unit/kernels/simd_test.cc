// The building blocks behind the fast CPU kernels' fixed reduction order and their exp.
// Internal headers of the CPU backend, hence the source-relative paths.
// 64-byte vectors are passed between inline helpers only; without AVX-512 GCC warns about an ABI
// that never crosses a library boundary here.
#pragma GCC diagnostic ignored "-Wpsabi"
#include "simd/simd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "simd/simd_math.h"
#include "tandem/kernels/dtype.h"

namespace tandem::kernels::cpu {
namespace {

TEST(Simd, HorizontalSumsAreBitEqualToOneAtATime) {
  std::mt19937 rng(8);
  // Wide dynamic range, so that any change in the order of additions changes the rounding.
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  for (int rep = 0; rep < 200; ++rep) {
    std::vector<float> lanes(16 * kLanes);
    for (float& x : lanes) x = std::ldexp(mantissa(rng), exponent(rng));
    F32x16 acc[16];
    for (int i = 0; i < 16; ++i) acc[i] = Load(lanes.data() + i * kLanes);
    float together[16];
    HorizontalSums<16>(acc, together);
    float twelve[12];
    HorizontalSums<12>(reinterpret_cast<const F32x16(&)[12]>(acc), twelve);
    for (int i = 0; i < 12; ++i) ASSERT_EQ(std::memcmp(&twelve[i], &together[i], sizeof(float)), 0);
    for (int i = 0; i < 16; ++i) {
      const float alone = HorizontalSum(acc[i]);
      ASSERT_EQ(std::memcmp(&alone, &together[i], sizeof(float)), 0) << "accumulator " << i;
    }
  }
}

TEST(Simd, HorizontalSumFollowsTheDocumentedTree) {
  float l[kLanes];
  for (int i = 0; i < kLanes; ++i) l[i] = std::ldexp(1.0f + i / 16.0f, (i * 7) % 23 - 11);
  float s[kLanes];
  std::memcpy(s, l, sizeof(s));
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int i = 0; i < width; ++i) s[i] = s[i] + s[i + width];
  }
  const float got = HorizontalSum(Load(l));
  EXPECT_EQ(std::memcmp(&got, &s[0], sizeof(float)), 0);
}

TEST(Simd, PartialLoadsZeroTheMissingLanesAndStoresTouchOnlyTheirs) {
  float src[kLanes], out[kLanes + 1];
  std::uint16_t bf16[kLanes];
  for (int i = 0; i < kLanes; ++i) {
    src[i] = static_cast<float>(i + 1);
    bf16[i] = kernels::F32ToBf16(src[i]);
  }
  for (int n = 1; n < kLanes; ++n) {
    float lanes[kLanes], wide[kLanes];
    Store(lanes, LoadPartial(src, n));
    Store(wide, LoadPartial(bf16, n));
    for (int i = 0; i < kLanes; ++i) {
      EXPECT_EQ(lanes[i], i < n ? src[i] : 0.0f) << "n " << n << " lane " << i;
      EXPECT_EQ(wide[i], i < n ? src[i] : 0.0f) << "bf16, n " << n << " lane " << i;
    }
    for (float& x : out) x = -1.0f;
    StorePartial(out, Splat(7.0f), n);
    for (int i = 0; i <= kLanes; ++i) EXPECT_EQ(out[i], i < n ? 7.0f : -1.0f) << "n " << n;
  }
}

TEST(SimdMath, ExpMatchesStdExpClosely) {
  double worst = 0;
  for (float x = -87.0f; x < 88.0f; x += 0.01f) {
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(ExpScalar(x) - want) / want);
  }
  EXPECT_LT(worst, 3e-7);  // a couple of float ulps
  EXPECT_EQ(ExpScalar(-200.0f), 0.0f);
  EXPECT_TRUE(std::isfinite(ExpScalar(200.0f)));
}

TEST(SimdMath, ExpAndSumNormalisesAgainstTheMaximum) {
  std::vector<float> scores = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
  for (int i = 0; i < 40; ++i) scores.push_back(-0.1f * i);
  const std::vector<float> raw = scores;
  const float sum = ExpAndSum(scores.data(), static_cast<int>(scores.size()));
  double want_sum = 0;
  for (std::size_t t = 0; t < raw.size(); ++t) {
    const double want = std::exp(static_cast<double>(raw[t]) - 3.0);
    EXPECT_NEAR(scores[t], want, 1e-6 * want) << t;
    want_sum += want;
  }
  EXPECT_NEAR(sum, want_sum, 1e-6 * want_sum);
}

}  // namespace
}  // namespace tandem::kernels::cpu
