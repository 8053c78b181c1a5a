// The fast CPU MatMul against the reference backend, and its batch-invariance contract.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "kernel_test_util.h"
#include "tandem/kernels/backend.h"
// simd.h's Dot() is the contract itself; 64-byte vectors stay between inline helpers (-Wpsabi).
#pragma GCC diagnostic ignored "-Wpsabi"
#include "simd/simd.h"

namespace tandem::kernels {
namespace {

using testing::BitEqual;
using testing::RandomFloats;
using testing::TestWeight;

// sum_i |x[r][i] * w[o][i]|: what the rounding error of y[r][o] scales with.
std::vector<float> DotBound(const std::vector<float>& x, std::int64_t rows, const WeightView& w) {
  std::vector<float> bound(rows * w.rows);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t o = 0; o < w.rows; ++o) {
      double s = 0;
      for (std::int64_t i = 0; i < w.cols; ++i) s += std::fabs(x[r * w.cols + i] * w.At(o, i));
      bound[r * w.rows + o] = static_cast<float>(s);
    }
  }
  return bound;
}

std::vector<float> Multiply(Backend& b, const std::vector<float>& x, std::int64_t rows,
                       const WeightView& w) {
  std::vector<float> y(rows * w.rows, NAN);
  b.MatMul(x.data(), rows, w, y.data());
  return y;
}

// The ISA copy simd.h compiled to in this file (the test's own flags), whose Dot() is the one below.
#if defined(TANDEM_SIMD_AVX512)
constexpr CpuIsa kDotIsa = CpuIsa::kAvx512;
#elif defined(TANDEM_SIMD_AVX2)
constexpr CpuIsa kDotIsa = CpuIsa::kAvx2;
#else
constexpr CpuIsa kDotIsa = CpuIsa::kGeneric;
#endif

class MatMulShapes
    : public ::testing::TestWithParam<
          std::tuple<DType, std::int64_t, std::int64_t, std::int64_t, CpuIsa>> {};

TEST_P(MatMulShapes, MatchesReference) {
  const auto [dtype, rows, out, in, isa] = GetParam();
  std::mt19937 rng(static_cast<unsigned>(rows * 7919 + out * 131 + in));
  TestWeight w(out, in, dtype, rng);
  const std::vector<float> x = RandomFloats(rows * in, rng);
  auto fast = CreateCpuBackend({.num_threads = 2, .isa = isa});
  auto ref = CreateReferenceCpuBackend();
  testing::ExpectClose(Multiply(*fast, x, rows, w.view), Multiply(*ref, x, rows, w.view),
                       DotBound(x, rows, w.view), 1e-5f);
}

INSTANTIATE_TEST_SUITE_P(
    OddAndRoundSizes, MatMulShapes,
    ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3),
                       ::testing::Values<std::int64_t>(1, 3, 16, 21),
                       ::testing::Values<std::int64_t>(1, 5, 64, 131),
                       ::testing::Values<std::int64_t>(1, 7, 16, 64, 100, 1000),
                       ::testing::ValuesIn(AvailableCpuIsas())),
    (testing::IsaParamName<MatMulShapes::ParamType, 4>));

// Every ISA copy this binary and CPU run: batch invariance is a property of each.
class MatMulInvariance : public ::testing::TestWithParam<std::tuple<DType, CpuIsa>> {
 protected:
  DType dtype() const { return std::get<0>(GetParam()); }
  std::unique_ptr<Backend> Fast(int threads) const {
    return CreateCpuBackend({.num_threads = threads, .isa = std::get<1>(GetParam())});
  }
};

TEST_P(MatMulInvariance, RowResultDoesNotDependOnBatch) {
  // 16 x 67 x 257 is above the threading threshold, one row alone is below it: both paths and
  // every row-tile remainder are exercised.
  constexpr std::int64_t kRows = 16, kOut = 67, kIn = 257;
  std::mt19937 rng(42);
  TestWeight w(kOut, kIn, dtype(), rng);
  const std::vector<float> x = RandomFloats(kRows * kIn, rng);
  auto fast = Fast(2);
  const std::vector<float> batch = Multiply(*fast, x, kRows, w.view);

  for (std::int64_t r = 0; r < kRows; ++r) {
    const std::vector<float> alone(x.begin() + r * kIn, x.begin() + (r + 1) * kIn);
    const std::vector<float> y = Multiply(*fast, alone, 1, w.view);
    EXPECT_TRUE(BitEqual(y.data(), batch.data() + r * kOut, kOut)) << "row " << r;
  }
  // Same rows in reverse order and in sub-batches of every size: each row lands in a different
  // tile slot.
  std::vector<float> reversed(kRows * kIn);
  for (std::int64_t r = 0; r < kRows; ++r) {
    std::copy(x.begin() + r * kIn, x.begin() + (r + 1) * kIn, reversed.begin() + (kRows - 1 - r) * kIn);
  }
  const std::vector<float> yr = Multiply(*fast, reversed, kRows, w.view);
  for (std::int64_t r = 0; r < kRows; ++r) {
    EXPECT_TRUE(BitEqual(yr.data() + (kRows - 1 - r) * kOut, batch.data() + r * kOut, kOut))
        << "reversed row " << r;
  }
  for (std::int64_t n = 2; n < kRows; ++n) {
    const std::int64_t first = kRows - n;
    const std::vector<float> sub(x.begin() + first * kIn, x.end());
    const std::vector<float> y = Multiply(*fast, sub, n, w.view);
    EXPECT_TRUE(BitEqual(y.data(), batch.data() + first * kOut, n * kOut)) << "sub-batch " << n;
  }
}

TEST_P(MatMulInvariance, ThreadCountDoesNotChangeBits) {
  constexpr std::int64_t kRows = 9, kOut = 301, kIn = 515;
  std::mt19937 rng(7);
  TestWeight w(kOut, kIn, dtype(), rng);
  const std::vector<float> x = RandomFloats(kRows * kIn, rng);
  const std::vector<float> one = Multiply(*Fast(1), x, kRows, w.view);
  for (int threads : {2, 3, 8}) {
    const std::vector<float> y = Multiply(*Fast(threads), x, kRows, w.view);
    EXPECT_TRUE(BitEqual(y.data(), one.data(), one.size())) << threads << " threads";
  }
}

// The contract behind batch invariance, checked directly: every element is simd.h's Dot() of its
// row and its weight row's floats, bit for bit, whatever tile computed it. 1100 columns span three
// of the AVX2 path's half-pass blocks (dot_tile.h, 512 floats) and end in a partial chunk; 7
// outputs and 1-9, 16, 17 or 33 rows give every row and output remainder of every path's tiles.
TEST_P(MatMulInvariance, EveryElementIsTheCanonicalDot) {
  constexpr std::int64_t kOut = 7, kIn = 1100;
  std::mt19937 rng(5);
  if (std::get<1>(GetParam()) != kDotIsa) {
    GTEST_SKIP() << "this file's Dot() is the " << CpuIsaName(kDotIsa) << " copy's";
  }
  TestWeight w(kOut, kIn, dtype(), rng);
  const std::vector<float> x = RandomFloats(33 * kIn, rng);
  auto fast = Fast(1);
  for (std::int64_t rows : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 33}) {
    const std::vector<float> y = Multiply(*fast, x, rows, w.view);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t o = 0; o < kOut; ++o) {
        const float want = cpu::Dot(x.data() + r * kIn, w.f32.data() + o * kIn, kIn);
        EXPECT_TRUE(BitEqual(&y[r * kOut + o], &want, 1))
            << rows << " rows, element " << r << ", " << o << ": " << y[r * kOut + o] << " vs " << want;
      }
    }
  }
}

// F16 and FP8 are widened in registers to exactly the floats of their float32 twin, so the fast
// kernel gives the twin's bits: batch invariance then carries over, and a quantised checkpoint
// matches its dequantised copy exactly. Rows 0..kOut cover whole and partial scale blocks, and the
// row slices start inside a block (an expert or head slice of a stacked tensor).
TEST_P(MatMulInvariance, SameBitsAsFloat32Twin) {
  constexpr std::int64_t kOut = 67, kIn = 257;
  std::mt19937 rng(5);
  TestWeight w(kOut, kIn, dtype(), rng);
  auto fast = Fast(2);
  for (std::int64_t rows : {1, 2, 3, 4, 5, 16}) {
    const std::vector<float> x = RandomFloats(rows * kIn, rng);
    const std::vector<float> y = Multiply(*fast, x, rows, w.view);
    const std::vector<float> twin = Multiply(*fast, x, rows, w.F32Twin());
    EXPECT_TRUE(BitEqual(y.data(), twin.data(), y.size())) << rows << " rows";
    for (std::int64_t first : {0, 5, 17, 40}) {
      const std::int64_t n = kOut - first - 3;
      const std::vector<float> ys = Multiply(*fast, x, rows, w.view.RowSlice(first, n));
      const std::vector<float> ts = Multiply(*fast, x, rows, w.F32Twin().RowSlice(first, n));
      EXPECT_TRUE(BitEqual(ys.data(), ts.data(), ys.size())) << rows << " rows from " << first;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Dtypes, MatMulInvariance,
    ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3),
                       ::testing::ValuesIn(AvailableCpuIsas())),
    (testing::IsaParamName<MatMulInvariance::ParamType, 1>));

TEST(CpuMatMul, LongReductionMatchesReference) {
  std::mt19937 rng(3);
  TestWeight w(40, 4099, DType::kBF16, rng);
  const std::vector<float> x = RandomFloats(2 * 4099, rng);
  auto fast = CreateCpuBackend({});
  auto ref = CreateReferenceCpuBackend();
  testing::ExpectClose(Multiply(*fast, x, 2, w.view), Multiply(*ref, x, 2, w.view), DotBound(x, 2, w.view),
                       1e-5f);
}

TEST(CpuMatMul, RepeatedCallsOnOneBackendAreStable) {
  std::mt19937 rng(11);
  TestWeight w(256, 256, DType::kF32, rng);
  const std::vector<float> x = RandomFloats(16 * 256, rng);
  auto fast = CreateCpuBackend({.num_threads = 2});
  const std::vector<float> first = Multiply(*fast, x, 16, w.view);
  for (int i = 0; i < 50; ++i) {
    const std::vector<float> y = Multiply(*fast, x, 16, w.view);
    ASSERT_TRUE(BitEqual(y.data(), first.data(), first.size())) << "call " << i;
  }
}

TEST(CpuMatMul, ConcurrentCallersOnOneBackendGetTheirOwnResults) {
  std::mt19937 rng(21);
  TestWeight w(300, 512, DType::kBF16, rng);
  const std::vector<float> x = RandomFloats(16 * 512, rng);
  auto fast = CreateCpuBackend({.num_threads = 2});
  const std::vector<float> want = Multiply(*fast, x, 16, w.view);
  std::vector<std::vector<float>> got(3);
  std::vector<std::thread> callers;
  for (auto& g : got) {
    callers.emplace_back([&] {
      for (int i = 0; i < 20; ++i) g = Multiply(*fast, x, 16 - i % 2, w.view);
    });
  }
  for (std::thread& t : callers) t.join();
  for (const auto& g : got) {
    // The last call of each caller used 15 rows: the first 15 rows of the 16-row result.
    ASSERT_EQ(g.size(), 15u * 300);
    EXPECT_TRUE(BitEqual(g.data(), want.data(), g.size()));
  }
}

}  // namespace
}  // namespace tandem::kernels
