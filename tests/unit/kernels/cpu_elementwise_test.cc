// The fast CPU row-wise ops against the reference backend, on odd sizes and every weight dtype, in
// every ISA copy of the kernels this binary and CPU can run.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "tandem/kernels/backend.h"

namespace tandem::kernels {
namespace {

using testing::RandomFloats;
using testing::TestWeight;

class CpuElementwise : public ::testing::TestWithParam<CpuIsa> {
 protected:
  std::mt19937 rng_{1234};
  std::unique_ptr<Backend> fast_ = CreateCpuBackend({.num_threads = 2, .isa = GetParam()});
  std::unique_ptr<Backend> ref_ = CreateReferenceCpuBackend();
};

std::vector<float> AbsPlusOne(const std::vector<float>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = std::fabs(v[i]) + 1.0f;
  return out;
}

TEST_P(CpuElementwise, RmsNormMatchesReference) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3}) {
    for (std::int64_t dim : {1, 7, 16, 64, 333}) {
      constexpr std::int64_t kRows = 5;
      TestWeight w(1, dim, dtype, rng_);
      const std::vector<float> x = RandomFloats(kRows * dim, rng_, -3.0f, 3.0f);
      std::vector<float> got(x.size()), want(x.size());
      fast_->RmsNorm(x.data(), kRows, dim, w.view, 1e-5f, got.data());
      ref_->RmsNorm(x.data(), kRows, dim, w.view, 1e-5f, want.data());
      testing::ExpectClose(got, want, AbsPlusOne(want), 1e-5f);
      // In place (x and y alias) gives the same result.
      std::vector<float> inplace = x;
      fast_->RmsNorm(inplace.data(), kRows, dim, w.view, 1e-5f, inplace.data());
      EXPECT_TRUE(testing::BitEqual(inplace.data(), got.data(), got.size())) << "dim " << dim;
    }
  }
}

TEST_P(CpuElementwise, SiluMulMatchesReference) {
  constexpr std::int64_t kRows = 3, kHidden = 173;
  const std::vector<float> gate = RandomFloats(kRows * kHidden, rng_, -8.0f, 8.0f);
  const std::vector<float> up = RandomFloats(kRows * kHidden, rng_, -2.0f, 2.0f);
  std::vector<float> got(gate.size()), want(gate.size());
  fast_->SiluMul(gate.data(), up.data(), kRows, kHidden, got.data());
  ref_->SiluMul(gate.data(), up.data(), kRows, kHidden, want.data());
  testing::ExpectClose(got, want, AbsPlusOne(want), 1e-5f);
}

TEST_P(CpuElementwise, SiluMulAndRmsNormRowsDoNotDependOnBatch) {
  // hidden = 173 is not a multiple of the vector width: rows start mid-chunk in the flat array.
  // 401 rows are enough elements for the backend to split the call over its threads.
  for (const std::int64_t kRows : {7, 401}) {
    constexpr std::int64_t kHidden = 173;
    const std::vector<float> gate = RandomFloats(kRows * kHidden, rng_, -10.0f, 10.0f);
    const std::vector<float> up = RandomFloats(kRows * kHidden, rng_);
    TestWeight w(1, kHidden, DType::kBF16, rng_);
    std::vector<float> silu(gate.size()), norm(gate.size());
    fast_->SiluMul(gate.data(), up.data(), kRows, kHidden, silu.data());
    fast_->RmsNorm(gate.data(), kRows, kHidden, w.view, 1e-6f, norm.data());
    for (std::int64_t r = 0; r < kRows; ++r) {
      std::vector<float> g(gate.begin() + r * kHidden, gate.begin() + (r + 1) * kHidden);
      std::vector<float> u(up.begin() + r * kHidden, up.begin() + (r + 1) * kHidden);
      std::vector<float> one(kHidden), one_norm(kHidden);
      fast_->SiluMul(g.data(), u.data(), 1, kHidden, one.data());
      fast_->RmsNorm(g.data(), 1, kHidden, w.view, 1e-6f, one_norm.data());
      ASSERT_TRUE(testing::BitEqual(one.data(), silu.data() + r * kHidden, kHidden))
          << "row " << r << " of " << kRows;
      ASSERT_TRUE(testing::BitEqual(one_norm.data(), norm.data() + r * kHidden, kHidden))
          << "row " << r << " of " << kRows;
    }
  }
}

TEST_P(CpuElementwise, SiluMulHandlesExtremeGates) {
  const std::vector<float> gate = {
      -1000.0f, -100.0f, -88.0f, -20.0f, 0.0f,  20.0f, 88.0f,  100.0f, 1000.0f,
      -0.5f,    3.0f,    -3.0f,  7.0f,   -7.0f, 50.0f, -50.0f, 1.0f};
  const std::vector<float> up(gate.size(), 1.5f);
  std::vector<float> got(gate.size()), want(gate.size());
  fast_->SiluMul(gate.data(), up.data(), 1,
                 static_cast<std::int64_t>(gate.size()), got.data());
  ref_->SiluMul(gate.data(), up.data(), 1,
                static_cast<std::int64_t>(gate.size()), want.data());
  testing::ExpectClose(got, want, AbsPlusOne(want), 1e-5f);
}

TEST_P(CpuElementwise, AxpyMatchesReference) {
  constexpr std::int64_t kN = 1031;
  const std::vector<float> x = RandomFloats(kN, rng_);
  const std::vector<float> y0 = RandomFloats(kN, rng_);
  std::vector<float> got = y0, want = y0;
  fast_->Axpy(-0.37f, x.data(), kN, got.data());
  ref_->Axpy(-0.37f, x.data(), kN, want.data());
  testing::ExpectClose(got, want, AbsPlusOne(want), 1e-6f);
}

TEST_P(CpuElementwise, RopeMatchesReferenceInBothLayouts) {
  // head_stride > rope_dim: only the first rope_dim dims of each head rotate (MLA's rope slice).
  constexpr std::int64_t kRows = 3;
  constexpr int kHeads = 5, kStride = 24, kRopeDim = 10;
  const std::vector<float> x = RandomFloats(kRows * kHeads * kStride, rng_);
  const std::vector<float> angles = RandomFloats(kRows * kRopeDim / 2, rng_, -3.0f, 3.0f);
  std::vector<float> cos(angles.size()), sin(angles.size());
  for (std::size_t i = 0; i < angles.size(); ++i) {
    cos[i] = std::cos(angles[i]);
    sin[i] = std::sin(angles[i]);
  }
  for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kHalfSplit}) {
    std::vector<float> got = x, want = x;
    fast_->Rope(got.data(), kRows, kHeads, kStride, kRopeDim, cos.data(), sin.data(), layout);
    ref_->Rope(want.data(), kRows, kHeads, kStride, kRopeDim, cos.data(), sin.data(), layout);
    testing::ExpectClose(got, want, AbsPlusOne(want), 1e-6f);
    EXPECT_NE(got, x);  // it did rotate something
  }
}

TEST_P(CpuElementwise, EmbedMatchesReference) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3}) {
    TestWeight table(37, 19, dtype, rng_);
    const std::vector<std::int32_t> ids = {36, 0, 5, 5, 17};
    std::vector<float> got(ids.size() * 19), want(ids.size() * 19);
    fast_->Embed(table.view, ids.data(), static_cast<std::int64_t>(ids.size()), got.data());
    ref_->Embed(table.view, ids.data(), static_cast<std::int64_t>(ids.size()), want.data());
    EXPECT_EQ(got, want);  // a copy (and exact bf16 widening): no rounding allowed
  }
}

TEST_P(CpuElementwise, AllocateFloatsIsZeroedAndAligned) {
  float* p = fast_->AllocateFloats(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(p[i], 0.0f);
  fast_->Free(p);
}

INSTANTIATE_TEST_SUITE_P(Isas, CpuElementwise, ::testing::ValuesIn(AvailableCpuIsas()),
                         testing::IsaName);

}  // namespace
}  // namespace tandem::kernels
