// The encoder ops (LayerNorm, GELU, bias, bidirectional attention) of both CPU backends.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "tandem/kernels/backend.h"

namespace tandem::kernels {
namespace {

using testing::RandomFloats;

WeightView Row(const std::vector<float>& v) {
  return WeightView{v.data(), DType::kF32, 1, static_cast<std::int64_t>(v.size()), {}};
}

// The reference backend and the fast one in every ISA copy this binary and CPU can run; each
// name()s its ISA ("cpu-avx2"), so a failure says which copy failed.
std::vector<std::unique_ptr<Backend>> Backends() {
  std::vector<std::unique_ptr<Backend>> b;
  b.push_back(CreateReferenceCpuBackend());
  for (CpuIsa isa : AvailableCpuIsas()) {
    b.push_back(CreateCpuBackend({.num_threads = 3, .isa = isa}));
  }
  return b;
}

TEST(CpuEncoderOpsTest, LayerNormMatchesHandComputedRows) {
  // Row [1, 2, 3, 4]: mean 2.5, biased variance 1.25. A second row offset by 1000 checks that a
  // large mean does not swallow the spread.
  const std::vector<float> x = {1, 2, 3, 4, 1001, 1002, 1003, 1004};
  const std::vector<float> w = {1.0f, 2.0f, 0.5f, -1.0f}, b = {0.0f, 1.0f, -1.0f, 0.25f};
  for (auto& be : Backends()) {
    SCOPED_TRACE(be->name());
    std::vector<float> y(8);
    be->LayerNorm(x.data(), 2, 4, Row(w), Row(b), 1e-5f, y.data());
    const double inv = 1.0 / std::sqrt(1.25 + 1e-5);
    const double z[4] = {-1.5 * inv, -0.5 * inv, 0.5 * inv, 1.5 * inv};
    for (int r = 0; r < 2; ++r) {
      for (int i = 0; i < 4; ++i) {
        EXPECT_NEAR(y[r * 4 + i], z[i] * w[i] + b[i], 2e-5) << be->name() << " " << r << "," << i;
      }
    }
    // No bias: the same rows less b.
    std::vector<float> y2(8);
    be->LayerNorm(x.data(), 2, 4, Row(w), WeightView{}, 1e-5f, y2.data());
    EXPECT_NEAR(y2[1], z[1] * w[1], 2e-5);
  }
}

TEST(CpuEncoderOpsTest, GeluBothForms) {
  const std::vector<float> x = {-3.0f, -1.0f, 0.0f, 0.5f, 1.0f, 4.0f};
  for (auto& be : Backends()) {
    SCOPED_TRACE(be->name());
    std::vector<float> erf(x.size()), tanh_form(x.size());
    be->Gelu(x.data(), static_cast<std::int64_t>(x.size()), GeluForm::kErf, erf.data());
    be->Gelu(x.data(), static_cast<std::int64_t>(x.size()), GeluForm::kTanh, tanh_form.data());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double v = x[i];
      EXPECT_NEAR(erf[i], 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))), 1e-6);
      const double t = std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v));
      EXPECT_NEAR(tanh_form[i], 0.5 * v * (1.0 + t), 1e-6);
    }
    // The forms differ (torch: gelu(1) = 0.841345, gelu_tanh(1) = 0.841192).
    EXPECT_NEAR(erf[4], 0.8413447f, 1e-6);
    EXPECT_NEAR(tanh_form[4], 0.8411920f, 1e-6);
  }
}

TEST(CpuEncoderOpsTest, AddBiasAddsToEveryRow) {
  const std::vector<float> b = {1.0f, -2.0f, 0.5f};
  for (auto& be : Backends()) {
    SCOPED_TRACE(be->name());
    std::vector<float> y = {0, 0, 0, 10, 10, 10};
    be->AddBias(y.data(), 2, Row(b));
    EXPECT_EQ(y, (std::vector<float>{1, -2, 0.5f, 11, 8, 10.5f}));
  }
}

// Fused qkv rows [q | k | v], as a vision block's qkv projection writes them.
struct QkvCase {
  int n, heads, hd;
  std::vector<float> qkv;
  FullAttentionParams Params(float* out) const {
    const std::int64_t d = static_cast<std::int64_t>(heads) * hd;
    return FullAttentionParams{qkv.data(), qkv.data() + d, qkv.data() + 2 * d, out, n, heads, hd,
                               3 * d, 3 * d, d, 1.0f / std::sqrt(static_cast<float>(hd))};
  }
};

TEST(CpuEncoderOpsTest, FastFullAttentionMatchesReferenceAcrossQueryChunks) {
  std::mt19937 rng(7);
  // 300 tokens: more than one 256-query chunk of the fast path.
  QkvCase c{300, 3, 16, RandomFloats(300 * 3 * 48, rng, -2.0f, 2.0f)};
  std::vector<float> a(300 * 48);
  CreateReferenceCpuBackend()->FullAttention(c.Params(a.data()));
  for (CpuIsa isa : AvailableCpuIsas()) {
    SCOPED_TRACE(CpuIsaName(isa));
    std::vector<float> b(300 * 48);
    CreateCpuBackend({.num_threads = 3, .isa = isa})->FullAttention(c.Params(b.data()));
    for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 2e-5) << i;
  }
}

TEST(CpuEncoderOpsTest, FullAttentionIsBidirectional) {
  std::mt19937 rng(9);
  QkvCase c{40, 2, 8, RandomFloats(40 * 3 * 16, rng)};
  for (auto& be : Backends()) {
    std::vector<float> before(40 * 16), after(40 * 16);
    be->FullAttention(c.Params(before.data()));
    QkvCase changed = c;
    for (int d = 0; d < 32; ++d) changed.qkv[39 * 48 + 16 + d] += 1.0f;  // last token's k and v
    be->FullAttention(changed.Params(after.data()));
    // The first token sees the last one (a causal kernel would leave it unchanged).
    double diff = 0.0;
    for (int d = 0; d < 16; ++d) diff += std::fabs(before[d] - after[d]);
    EXPECT_GT(diff, 1e-3) << be->name();
  }
}

TEST(CpuEncoderOpsTest, FullAttentionWithEqualKeysAveragesValues) {
  const int n = 5, hd = 4;
  QkvCase c{n, 1, hd, std::vector<float>(n * 3 * hd, 0.0f)};
  for (int t = 0; t < n; ++t) {
    for (int d = 0; d < hd; ++d) {
      c.qkv[t * 12 + d] = 0.3f * (t + d);  // q: any
      c.qkv[t * 12 + 4 + d] = 1.0f;        // k: equal, so the weights are uniform
      c.qkv[t * 12 + 8 + d] = static_cast<float>(t * 10 + d);
    }
  }
  for (auto& be : Backends()) {
    std::vector<float> out(n * hd);
    be->FullAttention(c.Params(out.data()));
    for (int t = 0; t < n; ++t) {
      for (int d = 0; d < hd; ++d) EXPECT_NEAR(out[t * hd + d], 20.0f + d, 1e-4) << be->name();
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
