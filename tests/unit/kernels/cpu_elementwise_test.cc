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

// Calls large enough for the backend to split them over its threads (>= 64Ki elements) give each
// row exactly what a call for that row alone gives: the splits fall on rows, or on 16-float
// chunks of the flat array, and every piece gets its own rows' operands.
TEST_P(CpuElementwise, SplitCallsEqualOneRowAtATime) {
  constexpr std::int64_t kRows = 401, kHidden = 173;  // 69373 elements; rows start mid-chunk
  const std::int64_t n = kRows * kHidden;
  const std::vector<float> x = RandomFloats(n, rng_, -4.0f, 4.0f);
  const std::vector<float> y0 = RandomFloats(n, rng_);
  TestWeight scale(1, kHidden, DType::kF32, rng_), bias(1, kHidden, DType::kBF16, rng_);
  auto row_of = [&](const std::vector<float>& v, std::int64_t r) {
    return std::vector<float>(v.begin() + r * kHidden, v.begin() + (r + 1) * kHidden);
  };
  auto expect_rows = [&](const std::vector<float>& whole, auto&& one_row, const char* op) {
    for (std::int64_t r = 0; r < kRows; ++r) {
      const std::vector<float> alone = one_row(r);
      ASSERT_TRUE(testing::BitEqual(alone.data(), whole.data() + r * kHidden, kHidden))
          << op << ": row " << r << " of " << kRows;
    }
  };

  std::vector<float> axpy = y0;
  fast_->Axpy(-0.37f, x.data(), n, axpy.data());
  expect_rows(
      axpy,
      [&](std::int64_t r) {
        std::vector<float> y = row_of(y0, r);
        fast_->Axpy(-0.37f, row_of(x, r).data(), kHidden, y.data());
        return y;
      },
      "Axpy");

  for (GeluForm form : {GeluForm::kErf, GeluForm::kTanh}) {
    std::vector<float> gelu(n);
    fast_->Gelu(x.data(), n, form, gelu.data());
    expect_rows(
        gelu,
        [&](std::int64_t r) {
          std::vector<float> y(kHidden);
          fast_->Gelu(row_of(x, r).data(), kHidden, form, y.data());
          return y;
        },
        "Gelu");
  }

  std::vector<float> norm(n);
  fast_->LayerNorm(x.data(), kRows, kHidden, scale.view, bias.view, 1e-5f, norm.data());
  expect_rows(
      norm,
      [&](std::int64_t r) {
        std::vector<float> y(kHidden);
        fast_->LayerNorm(row_of(x, r).data(), 1, kHidden, scale.view, bias.view, 1e-5f, y.data());
        return y;
      },
      "LayerNorm");

  std::vector<float> biased = x;
  fast_->AddBias(biased.data(), kRows, bias.view);
  expect_rows(
      biased,
      [&](std::int64_t r) {
        std::vector<float> y = row_of(x, r);
        fast_->AddBias(y.data(), 1, bias.view);
        return y;
      },
      "AddBias");

  // Rope: a row is kHeads heads of kStride floats, with its own cos/sin row.
  constexpr int kHeads = 5, kStride = 35, kRopeDim = 34;
  const std::int64_t row_floats = kHeads * kStride;
  const std::vector<float> q = RandomFloats(kRows * row_floats, rng_);
  const std::vector<float> angles = RandomFloats(kRows * kRopeDim / 2, rng_, -3.0f, 3.0f);
  std::vector<float> cos(angles.size()), sin(angles.size());
  for (std::size_t i = 0; i < angles.size(); ++i) {
    cos[i] = std::cos(angles[i]);
    sin[i] = std::sin(angles[i]);
  }
  for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kHalfSplit}) {
    std::vector<float> whole = q;
    fast_->Rope(whole.data(), kRows, kHeads, kStride, kRopeDim, cos.data(), sin.data(), layout);
    for (std::int64_t r = 0; r < kRows; ++r) {
      std::vector<float> one(q.begin() + r * row_floats, q.begin() + (r + 1) * row_floats);
      fast_->Rope(one.data(), 1, kHeads, kStride, kRopeDim, cos.data() + r * kRopeDim / 2,
                  sin.data() + r * kRopeDim / 2, layout);
      ASSERT_TRUE(testing::BitEqual(one.data(), whole.data() + r * row_floats, row_floats))
          << "Rope: row " << r << " of " << kRows;
    }
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
