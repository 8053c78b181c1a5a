// MatMul on weights packed into panels (panels.h): the layout itself, the fast kernel against the
// reference backend, and its order contract (one FMA per column, in column order), which is what
// makes it batch-invariant and the same on the AVX2 and AVX-512 copies.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "kernel_test_util.h"
#include "tandem/kernels/backend.h"
#include "tandem/kernels/panels.h"

namespace tandem::kernels {
namespace {

using testing::BitEqual;
using testing::RandomFloats;
using testing::TestWeight;

constexpr DType kDtypes[] = {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3};

std::vector<float> Multiply(Backend& b, const std::vector<float>& x, std::int64_t rows,
                            const WeightView& w) {
  std::vector<float> y(rows * w.rows, NAN);
  b.MatMul(x.data(), rows, w, y.data());
  return y;
}

TEST(PanelWeight, EveryElementKeepsItsValueAndRowSlicesFollowPanels) {
  std::mt19937 rng(3);
  for (DType dtype : kDtypes) {
    for (auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {31, 17}, {33, 257},
                              {67, 64}}) {
      TestWeight w(rows, cols, dtype, rng);
      const PanelWeight packed = PanelWeight::Pack(w.view);
      const WeightView& p = packed.view();
      ASSERT_EQ(p.layout, WeightLayout::kPanels);
      ASSERT_EQ(p.rows, rows);
      ASSERT_EQ(p.cols, cols);
      EXPECT_EQ(packed.bytes(),
                static_cast<std::size_t>((rows + kPanelRows - 1) / kPanelRows * kPanelRows * cols) *
                    DTypeSize(dtype));
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = 0; c < cols; ++c) {
          const float a = w.view.At(r, c), b = p.At(r, c);
          ASSERT_TRUE(BitEqual(&a, &b, 1)) << DTypeName(dtype) << " " << r << ", " << c;
        }
      }
      if (rows > kPanelRows) {
        const WeightView slice = p.RowSlice(kPanelRows, rows - kPanelRows);
        for (std::int64_t c = 0; c < cols; ++c) {
          const float a = w.view.At(rows - 1, c), b = slice.At(rows - 1 - kPanelRows, c);
          ASSERT_TRUE(BitEqual(&a, &b, 1)) << DTypeName(dtype) << " slice column " << c;
        }
      }
    }
  }
}

class PanelMatMul : public ::testing::TestWithParam<std::tuple<DType, CpuIsa>> {
 protected:
  DType dtype() const { return std::get<0>(GetParam()); }
  CpuIsa isa() const { return std::get<1>(GetParam()); }
  std::unique_ptr<Backend> Fast(int threads) const {
    return CreateCpuBackend({.num_threads = threads, .isa = isa()});
  }
};

// Against the reference backend (which reads packed weights through WeightView::At), within
// 1e-5 of sum |x * w|, across row counts on both sides of the decode/prefill plans and odd sizes.
TEST_P(PanelMatMul, MatchesReference) {
  std::mt19937 rng(17);
  auto fast = Fast(2);
  auto ref = CreateReferenceCpuBackend();
  for (auto [out, in] : {std::pair<std::int64_t, std::int64_t>{1, 7}, {33, 100}, {70, 300},
                         {64, 1000}}) {
    TestWeight w(out, in, dtype(), rng);
    const PanelWeight packed = PanelWeight::Pack(w.view);
    for (std::int64_t rows : {1, 3, 16, 17, 40}) {
      const std::vector<float> x = RandomFloats(rows * in, rng);
      std::vector<float> bound(rows * out);
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t o = 0; o < out; ++o) {
          double s = 0;
          for (std::int64_t i = 0; i < in; ++i) s += std::fabs(x[r * in + i] * w.view.At(o, i));
          bound[r * out + o] = static_cast<float>(s);
        }
      }
      const std::vector<float> want = Multiply(*ref, x, rows, w.view);
      testing::ExpectClose(Multiply(*fast, x, rows, packed.view()), want, bound, 1e-5f);
      testing::ExpectClose(Multiply(*ref, x, rows, packed.view()), want, bound, 0.0f);
    }
  }
}

// The order contract, element by element: ((x0 * w0 + 0) + x1 * w1) + ..., each step one FMA
// (a multiply and an add in the generic copy), with w the weight's float value. 1800 columns span
// eight of the prefill plan's 256-column slices; 1, 16 (decode plan) and 17, 40, 300 rows
// (prefill plan, with remainders of every tile height; 17 and 40 rows panel by panel, 300 rows
// as two blocks of 150 slice by slice) all must agree. 37 and 53 outputs end in a panel of 5
// and of 21 outputs: AVX2's half-panel tiles (16 outputs each) with a cut first and second half.
TEST_P(PanelMatMul, EveryElementIsTheColumnOrderFmaChain) {
  for (const std::int64_t out : {37, 53}) {
    constexpr std::int64_t kIn = 1800;
    std::mt19937 rng(5);
    TestWeight w(out, kIn, dtype(), rng);
    const PanelWeight packed = PanelWeight::Pack(w.view);
    const std::vector<float> x = RandomFloats(300 * kIn, rng);
    auto fast = Fast(1);
    const bool fused = isa() != CpuIsa::kGeneric;
    for (std::int64_t rows : {1, 16, 17, 40, 300}) {
      const std::vector<float> y = Multiply(*fast, x, rows, packed.view());
      for (std::int64_t r = 0; r < rows; r += (rows > 40 ? 13 : 1)) {
        for (std::int64_t o = 0; o < out; ++o) {
          float want = 0.0f;
          for (std::int64_t k = 0; k < kIn; ++k) {
            const float a = x[r * kIn + k], b = w.view.At(o, k);
            if (fused) {
              want = std::fma(a, b, want);
            } else {
              const float product = a * b;
              want = want + product;
            }
          }
          ASSERT_TRUE(BitEqual(&y[r * out + o], &want, 1))
              << out << " outputs, " << rows << " rows, element " << r << ", " << o << ": "
              << y[r * out + o] << " vs " << want;
        }
      }
    }
  }
}

TEST_P(PanelMatMul, RowResultDoesNotDependOnBatchOrThreads) {
  constexpr std::int64_t kRows = 45, kOut = 70, kIn = 333;
  std::mt19937 rng(42);
  TestWeight w(kOut, kIn, dtype(), rng);
  const PanelWeight packed = PanelWeight::Pack(w.view);
  const std::vector<float> x = RandomFloats(kRows * kIn, rng);
  const std::vector<float> batch = Multiply(*Fast(2), x, kRows, packed.view());
  for (int threads : {1, 3, 8}) {
    const std::vector<float> y = Multiply(*Fast(threads), x, kRows, packed.view());
    EXPECT_TRUE(BitEqual(y.data(), batch.data(), y.size())) << threads << " threads";
  }
  auto fast = Fast(2);
  for (std::int64_t n : {1, 2, 5, 16, 17, 30}) {
    for (std::int64_t first : {std::int64_t{0}, kRows - n}) {
      const std::vector<float> sub(x.begin() + first * kIn, x.begin() + (first + n) * kIn);
      const std::vector<float> y = Multiply(*fast, sub, n, packed.view());
      EXPECT_TRUE(BitEqual(y.data(), batch.data() + first * kOut, n * kOut))
          << n << " rows from " << first;
    }
  }
}

// Prefill batches: 300 rows are two row blocks of 150 and 70 outputs three panels, so 1, 2, 3 and
// 8 threads split the panels differently; 333 columns run panel by panel (the block's packed x
// is small), 1800 columns slice by slice (it is not), with the next panel slice fetched ahead in
// both orders. Every row keeps the bits it has alone.
TEST_P(PanelMatMul, PrefillPlansKeepEveryRowsBits) {
  constexpr std::int64_t kRows = 300, kOut = 70;
  for (std::int64_t in : {333, 1800}) {
    std::mt19937 rng(43);
    TestWeight w(kOut, in, dtype(), rng);
    const PanelWeight packed = PanelWeight::Pack(w.view);
    const std::vector<float> x = RandomFloats(kRows * in, rng);
    const std::vector<float> one = Multiply(*Fast(1), x, kRows, packed.view());
    for (int threads : {2, 3, 8}) {
      const std::vector<float> y = Multiply(*Fast(threads), x, kRows, packed.view());
      EXPECT_TRUE(BitEqual(y.data(), one.data(), y.size())) << threads << " threads, " << in;
    }
    auto fast = Fast(3);
    for (std::int64_t r : {std::int64_t{0}, std::int64_t{149}, std::int64_t{150}, kRows - 1}) {
      const std::vector<float> row(x.begin() + r * in, x.begin() + (r + 1) * in);
      const std::vector<float> y = Multiply(*fast, row, 1, packed.view());
      EXPECT_TRUE(BitEqual(y.data(), one.data() + r * kOut, kOut)) << "row " << r << ", " << in;
    }
  }
}

// Narrow dtypes are widened to their float32 twin's values, so the twin packed gives the same
// bits; a row slice at a panel boundary gives the slice of the full result.
TEST_P(PanelMatMul, SameBitsAsFloat32TwinAndRowSlices) {
  constexpr std::int64_t kOut = 100, kIn = 257;
  std::mt19937 rng(9);
  TestWeight w(kOut, kIn, dtype(), rng);
  const PanelWeight packed = PanelWeight::Pack(w.view);
  const PanelWeight twin = PanelWeight::Pack(w.F32Twin());
  auto fast = Fast(2);
  for (std::int64_t rows : {1, 4, 16, 33}) {
    const std::vector<float> x = RandomFloats(rows * kIn, rng);
    const std::vector<float> y = Multiply(*fast, x, rows, packed.view());
    const std::vector<float> t = Multiply(*fast, x, rows, twin.view());
    EXPECT_TRUE(BitEqual(y.data(), t.data(), y.size())) << rows << " rows";
    const std::int64_t first = 2 * kPanelRows, n = kOut - first;
    const std::vector<float> s = Multiply(*fast, x, rows, packed.view().RowSlice(first, n));
    for (std::int64_t r = 0; r < rows; ++r) {
      EXPECT_TRUE(BitEqual(s.data() + r * n, y.data() + r * kOut + first, n))
          << rows << " rows, slice row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Dtypes, PanelMatMul,
    ::testing::Combine(::testing::ValuesIn(kDtypes), ::testing::ValuesIn(AvailableCpuIsas())),
    (testing::IsaParamName<PanelMatMul::ParamType, 1>));

}  // namespace
}  // namespace tandem::kernels
