// MatMul of bf16 weights in bf16 products (CpuBackendOptions::bf16_matmul = kAmx on AMX tiles,
// kAvx512Bf16 with AVX512-BF16's dot products): the packed layout, each engine against a
// bf16-activation oracle, and batch invariance across row counts, row positions and threads. An
// engine's tests skip on CPUs without its instructions; the layout tests run anywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "tandem/kernels/backend.h"
#include "tandem/kernels/panels.h"

namespace tandem::kernels {
namespace {

using testing::BitEqual;
using testing::RandomFloats;
using testing::TestWeight;

// What the AMX MatMul computes, in double: x rounded to bf16 (nearest even) times the weight.
// Also returns sum |term| for the error bound.
void Bf16Oracle(const std::vector<float>& x, std::int64_t rows, const WeightView& w,
                std::vector<double>* y, std::vector<double>* magnitude) {
  y->assign(rows * w.rows, 0.0);
  magnitude->assign(rows * w.rows, 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t o = 0; o < w.rows; ++o) {
      double sum = 0.0, mag = 0.0;
      for (std::int64_t c = 0; c < w.cols; ++c) {
        const double term =
            static_cast<double>(Bf16ToF32(F32ToBf16(x[r * w.cols + c]))) * w.At(o, c);
        sum += term;
        mag += std::fabs(term);
      }
      (*y)[r * w.rows + o] = sum;
      (*magnitude)[r * w.rows + o] = mag;
    }
  }
}

std::vector<float> Multiply(Backend& b, const float* x, std::int64_t rows, const WeightView& w) {
  std::vector<float> y(rows * w.rows, NAN);
  b.MatMul(x, rows, w, y.data());
  return y;
}

// float32 sums of products exact in float32 (bf16 x bf16): within 1e-5 of sum |term|.
void ExpectNearOracle(const std::vector<float>& x, std::int64_t rows, const WeightView& w,
                      const std::vector<float>& got, const std::string& what) {
  std::vector<double> want, magnitude;
  Bf16Oracle(x, rows, w, &want, &magnitude);
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5 * magnitude[i] + 1e-30)
        << what << ": row " << i / w.rows << " output " << i % w.rows;
  }
}

std::unique_ptr<Backend> AmxBackend(int threads) {
  return CreateCpuBackend({.num_threads = threads, .bf16_matmul = Bf16MatMul::kAmx});
}

bool Available(Bf16MatMul mode) {
  return mode == Bf16MatMul::kAmx ? IsAmxBf16Available() : IsAvx512Bf16Available();
}

// The kernel tests, once per engine of bf16 products.
class Bf16ProductsMatMul : public ::testing::TestWithParam<Bf16MatMul> {
 protected:
  void SetUp() override {
    if (!Available(GetParam())) {
      GTEST_SKIP() << "this CPU (or OS) does not run " << Bf16MatMulName(GetParam())
                   << ", or the build has no AVX-512 kernels";
    }
  }
  std::unique_ptr<Backend> Bf16Backend(int threads) const {
    return CreateCpuBackend({.num_threads = threads, .bf16_matmul = GetParam()});
  }
};

TEST(Bf16Tiles, EveryElementKeepsItsValueAndRowSlicesFollowGroups) {
  std::mt19937 rng(5);
  for (auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {15, 31}, {17, 33},
                            {40, 100}, {64, 64}}) {
    TestWeight w(rows, cols, DType::kBF16, rng);
    const PanelWeight packed = PanelWeight::Pack(w.view, WeightLayout::kBf16Tiles);
    const WeightView& p = packed.view();
    ASSERT_EQ(p.layout, WeightLayout::kBf16Tiles);
    ASSERT_EQ(p.rows, rows);
    ASSERT_EQ(p.cols, cols);
    const std::int64_t padded_rows = (rows + 15) / 16 * 16, padded_cols = (cols + 31) / 32 * 32;
    EXPECT_EQ(packed.bytes(), static_cast<std::size_t>(padded_rows * padded_cols * 2));
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) {
        const float a = w.view.At(r, c), b = p.At(r, c);
        ASSERT_TRUE(BitEqual(&a, &b, 1)) << rows << "x" << cols << " at " << r << ", " << c;
      }
    }
    if (rows > kTileGroupRows) {
      const WeightView slice = p.RowSlice(kTileGroupRows, rows - kTileGroupRows);
      for (std::int64_t c = 0; c < cols; ++c) {
        const float a = w.view.At(rows - 1, c), b = slice.At(rows - 1 - kTileGroupRows, c);
        ASSERT_TRUE(BitEqual(&a, &b, 1)) << "slice column " << c;
      }
    }
  }
}

TEST(Bf16Tiles, HoldBf16Only) {
  std::mt19937 rng(6);
  TestWeight w(16, 32, DType::kF32, rng);
  EXPECT_THROW(PanelWeight::Pack(w.view, WeightLayout::kBf16Tiles), std::invalid_argument);
}

TEST(Bf16MatMulMode, ParsesNamesAndRefusesWhatThisMachineCannotRun) {
  std::string error;
  EXPECT_EQ(ParseAvailableBf16MatMul("f32", CpuIsa::kAuto, &error), Bf16MatMul::kF32);
  EXPECT_FALSE(ParseAvailableBf16MatMul("bf16", CpuIsa::kAuto, &error).has_value());
  EXPECT_EQ(error, "bf16: one of auto, f32, amx, avx512bf16");
  error.clear();
  const auto dp = ParseAvailableBf16MatMul("avx512bf16", CpuIsa::kAuto, &error);
  EXPECT_EQ(dp.has_value(), IsAvx512Bf16Available());
  EXPECT_EQ(error.empty(), IsAvx512Bf16Available()) << error;
  if (IsAvx512Bf16Available()) {
    EXPECT_FALSE(ParseAvailableBf16MatMul("avx512bf16", CpuIsa::kGeneric, &error).has_value());
    EXPECT_EQ(error, "avx512bf16 runs beside the avx512 kernels, not generic");
  } else {
    EXPECT_THROW(CreateCpuBackend({.bf16_matmul = Bf16MatMul::kAvx512Bf16}), std::invalid_argument);
  }
  error.clear();
  const auto amx = ParseAvailableBf16MatMul("amx", CpuIsa::kAuto, &error);
  EXPECT_EQ(amx.has_value(), IsAmxBf16Available());
  EXPECT_EQ(error.empty(), IsAmxBf16Available()) << error;
  if (!IsAmxBf16Available()) {
    EXPECT_THROW(AmxBackend(1), std::invalid_argument);
    return;
  }
  // AMX runs beside the AVX-512 copy only.
  EXPECT_FALSE(ParseAvailableBf16MatMul("amx", CpuIsa::kGeneric, &error).has_value());
  EXPECT_EQ(error, "amx runs beside the avx512 kernels, not generic");
  EXPECT_THROW(CreateCpuBackend({.isa = CpuIsa::kGeneric, .bf16_matmul = Bf16MatMul::kAmx}),
               std::invalid_argument);
}

// The services' default: the peers' bf16 arithmetic for bf16 checkpoints where this CPU has it,
// AMX before the dot products, the dot products only where they outrun float32 FMAs; exact float32
// products for every other dtype and ISA copy.
TEST(Bf16MatMulMode, AutoPicksBf16ProductsForBf16CheckpointsWhereTheCpuHasThem) {
  for (DType weights : {DType::kF32, DType::kF16, DType::kF8E4M3}) {
    EXPECT_EQ(AutoBf16MatMul(CpuIsa::kAuto, weights), Bf16MatMul::kF32) << DTypeName(weights);
  }
  EXPECT_EQ(AutoBf16MatMul(CpuIsa::kGeneric, DType::kBF16), Bf16MatMul::kF32);
  if (IsCpuIsaAvailable(CpuIsa::kAvx2)) {
    EXPECT_EQ(AutoBf16MatMul(CpuIsa::kAvx2, DType::kBF16), Bf16MatMul::kF32);
  }
  const Bf16MatMul picked = AutoBf16MatMul(CpuIsa::kAuto, DType::kBF16);
  const std::optional<Bf16DotRates>& rates = Bf16DotRatesOfThisCpu();
  const Bf16MatMul expected = IsAmxBf16Available() ? Bf16MatMul::kAmx
                              : IsAvx512Bf16Available() && Bf16DotsPayOff(*rates)
                                  ? Bf16MatMul::kAvx512Bf16
                                  : Bf16MatMul::kF32;
  if (rates) {
    std::cout << "VDPBF16PS " << rates->dot_gflops << " GFLOP/s, FMA " << rates->fma_gflops
              << " GFLOP/s on one core: auto picks " << Bf16MatMulName(picked) << "\n";
  }
  EXPECT_EQ(picked, expected) << Bf16MatMulName(picked);
  // Whatever it picks, a backend runs it.
  auto backend = CreateCpuBackend({.num_threads = 1, .bf16_matmul = picked});
  if (picked != Bf16MatMul::kF32) {
    EXPECT_EQ(backend->name(), "cpu-avx512-" + std::string(Bf16MatMulName(picked)));
  }
}

// The dot products pay off only at kBf16DotMinSpeedup x the FMA's flops: an AMD Zen 5 core's
// rates (2x and more) pick them, an Intel Emerald Rapids core's (half) keeps float32 products.
TEST(Bf16MatMulMode, TheDotProductsPayOffOnlyWhereTheyOutrunTheFma) {
  EXPECT_TRUE(Bf16DotsPayOff({.dot_gflops = 500, .fma_gflops = 237}));
  EXPECT_FALSE(Bf16DotsPayOff({.dot_gflops = 86, .fma_gflops = 174}));
  EXPECT_FALSE(
      Bf16DotsPayOff({.dot_gflops = 174, .fma_gflops = 174}));  // same rate: rounding costs
  EXPECT_TRUE(Bf16DotsPayOff({.dot_gflops = kBf16DotMinSpeedup * 100, .fma_gflops = 100}));
  EXPECT_FALSE(Bf16DotsPayOff({.dot_gflops = 0.99 * kBf16DotMinSpeedup * 100, .fma_gflops = 100}));
}

// The measurement exists exactly where the instruction does, gives rates a core can have, and
// the same decision when taken again (the choice must not flip from one process to the next).
TEST(Bf16MatMulMode, TheMeasuredRatesAreStableEnoughToDecideOn) {
  const std::optional<Bf16DotRates> first = MeasureBf16DotRates();
  ASSERT_EQ(first.has_value(), IsAvx512Bf16Available());
  if (!first) GTEST_SKIP() << "no AVX512-BF16 here";
  for (int again = 0; again < 5; ++again) {
    const std::optional<Bf16DotRates> rates = MeasureBf16DotRates();
    ASSERT_TRUE(rates.has_value());
    // Between 1 GFLOP/s and 64 flops x 4 per cycle at 8 GHz: a wrong flop count or a timer
    // misread lands outside.
    for (double gflops : {rates->dot_gflops, rates->fma_gflops}) {
      EXPECT_GT(gflops, 1);
      EXPECT_LT(gflops, 64 * 4 * 8);
    }
    EXPECT_EQ(Bf16DotsPayOff(*rates), Bf16DotsPayOff(*first))
        << "dot " << rates->dot_gflops << " fma " << rates->fma_gflops << " vs dot "
        << first->dot_gflops << " fma " << first->fma_gflops;
  }
}

// A backend without AMX that is handed bf16 tiles anyway computes the same arithmetic slowly.
TEST(Bf16MatMulMode, AnyBackendMultipliesTiles) {
  std::mt19937 rng(7);
  TestWeight w(33, 70, DType::kBF16, rng);
  const PanelWeight packed = PanelWeight::Pack(w.view, WeightLayout::kBf16Tiles);
  const std::vector<float> x = RandomFloats(5 * 70, rng);
  auto plain = CreateCpuBackend({.num_threads = 2});
  ExpectNearOracle(x, 5, packed.view(), Multiply(*plain, x.data(), 5, packed.view()), "fallback");
  auto ref = CreateReferenceCpuBackend();
  const std::vector<float> exact = Multiply(*ref, x.data(), 5, packed.view());
  const std::vector<float> rows_major = Multiply(*ref, x.data(), 5, w.view);
  EXPECT_TRUE(BitEqual(exact.data(), rows_major.data(), exact.size()));
}

TEST_P(Bf16ProductsMatMul, PrefersTilesForBf16Only) {
  auto amx = Bf16Backend(1);
  EXPECT_EQ(amx->name(), "cpu-avx512-" + std::string(Bf16MatMulName(GetParam())));
  EXPECT_EQ(amx->preferred_matmul_layout(DType::kBF16), WeightLayout::kBf16Tiles);
  EXPECT_EQ(amx->preferred_matmul_layout(DType::kF32), WeightLayout::kPanels);
  EXPECT_EQ(amx->preferred_matmul_layout(DType::kF16), WeightLayout::kPanels);
  auto plain = CreateCpuBackend({.num_threads = 1});
  EXPECT_EQ(plain->preferred_matmul_layout(DType::kBF16), WeightLayout::kPanels);
}

// Row counts on both sides of one and two 16-row tiles and of the 1 MiB pass of packed x; outputs
// and columns that are not whole tiles, chunks or tile pairs.
TEST_P(Bf16ProductsMatMul, MatchesTheBf16ActivationOracle) {
  std::mt19937 rng(11);
  auto amx = Bf16Backend(2);
  for (auto [out, in] : {std::pair<std::int64_t, std::int64_t>{1, 7}, {16, 32}, {17, 33},
                         {33, 100}, {70, 300}, {64, 1000}, {48, 4100}}) {
    TestWeight w(out, in, DType::kBF16, rng);
    const PanelWeight packed = PanelWeight::Pack(w.view, WeightLayout::kBf16Tiles);
    const std::int64_t max_rows = in > 1000 ? 300 : 140;
    for (std::int64_t rows : {1, 2, 15, 16, 17, 31, 33, 64, 129, 140, 300}) {
      if (rows > max_rows) continue;
      const std::vector<float> x = RandomFloats(rows * in, rng, -2.0f, 2.0f);
      ExpectNearOracle(x, rows, packed.view(), Multiply(*amx, x.data(), rows, packed.view()),
                       std::to_string(rows) + " rows x " + std::to_string(out) + "x" +
                           std::to_string(in));
      if (HasFatalFailure()) return;
    }
  }
}

// A row's outputs are the same bits alone, at any offset inside any batch (so in any tile and at
// any position in it), and with any number of threads.
TEST_P(Bf16ProductsMatMul, RowsKeepTheirBitsInAnyBatch) {
  std::mt19937 rng(13);
  for (auto [out, in] : {std::pair<std::int64_t, std::int64_t>{70, 300}, {96, 2100}}) {
    TestWeight w(out, in, DType::kBF16, rng);
    const PanelWeight packed = PanelWeight::Pack(w.view, WeightLayout::kBf16Tiles);
    constexpr std::int64_t kRows = 300;
    const std::vector<float> x = RandomFloats(kRows * in, rng);
    auto one = Bf16Backend(1);
    const std::vector<float> whole = Multiply(*one, x.data(), kRows, packed.view());
    for (int threads : {2, 3, 8}) {
      auto b = Bf16Backend(threads);
      const std::vector<float> again = Multiply(*b, x.data(), kRows, packed.view());
      ASSERT_TRUE(BitEqual(whole.data(), again.data(), whole.size())) << threads << " threads";
    }
    auto two = Bf16Backend(2);
    for (auto [first, count] : {std::pair<std::int64_t, std::int64_t>{0, 1}, {7, 1}, {299, 1},
                                {5, 3}, {3, 16}, {9, 17}, {100, 33}, {1, 150}}) {
      const std::vector<float> part = Multiply(*two, x.data() + first * in, count, packed.view());
      ASSERT_TRUE(BitEqual(whole.data() + first * out, part.data(), part.size()))
          << out << "x" << in << ": rows " << first << " + " << count;
    }
  }
}

// silu(x . gate) * (x . up) the unfused way: each of the pair packed as tiles on its own,
// MatMul twice, SiluMul.
std::vector<float> GatedUnfused(Backend& b, const std::vector<float>& x, std::int64_t rows,
                                const WeightView& gate, const WeightView& up) {
  const PanelWeight g = PanelWeight::Pack(gate, WeightLayout::kBf16Tiles);
  const PanelWeight u = PanelWeight::Pack(up, WeightLayout::kBf16Tiles);
  std::vector<float> gy = Multiply(b, x.data(), rows, g.view());
  const std::vector<float> uy = Multiply(b, x.data(), rows, u.view());
  b.SiluMul(gy.data(), uy.data(), rows, gate.rows, gy.data());
  return gy;
}

std::vector<float> Gated(Backend& b, const std::vector<float>& x, std::int64_t rows,
                         const PanelWeight& pair, std::int64_t hidden) {
  std::vector<float> y(rows * hidden, NAN);
  b.GatedMatMul(x.data(), rows, pair.view(), hidden, y.data());
  return y;
}

TEST(GatedPair, PacksGroupsInTurnAndRefusesMismatchedPairs) {
  std::mt19937 rng(17);
  TestWeight gate(20, 40, DType::kBF16, rng), up(20, 40, DType::kBF16, rng);
  const PanelWeight pair = PanelWeight::PackGated(gate.view, up.view);
  EXPECT_EQ(pair.view().rows, 2 * 2 * kTileGroupRows);  // 20 rows: 2 groups each, padded
  EXPECT_EQ(pair.view().layout, WeightLayout::kBf16Tiles);
  for (std::int64_t r = 0; r < 20; ++r) {
    const std::int64_t group = r / kTileGroupRows, in_group = r % kTileGroupRows;
    for (std::int64_t c = 0; c < 40; ++c) {
      ASSERT_EQ(pair.view().At(2 * group * kTileGroupRows + in_group, c), gate.view.At(r, c));
      ASSERT_EQ(pair.view().At((2 * group + 1) * kTileGroupRows + in_group, c), up.view.At(r, c));
    }
  }
  EXPECT_EQ(pair.view().At(kTileGroupRows + 1, 3), up.view.At(1, 3));
  EXPECT_EQ(pair.view().At(2 * kTileGroupRows + 10, 3), 0.0f);  // gate group 1's padding
  TestWeight other(20, 41, DType::kBF16, rng), f32(20, 40, DType::kF32, rng);
  EXPECT_THROW(PanelWeight::PackGated(gate.view, other.view), std::invalid_argument);
  EXPECT_THROW(PanelWeight::PackGated(f32.view, f32.view), std::invalid_argument);
}

// Any backend: Backend::GatedMatMul's own path (MatMul over the pair, SiluMul per group) gives
// the bits of the two products and SiluMul apart.
TEST(GatedPair, TheDefaultPathEqualsTheProductsApart) {
  std::mt19937 rng(19);
  auto plain = CreateCpuBackend({.num_threads = 2});
  EXPECT_FALSE(plain->fuses_matmuls(DType::kBF16));
  for (auto [hidden, in] : {std::pair<std::int64_t, std::int64_t>{16, 32}, {21, 40}}) {
    TestWeight gate(hidden, in, DType::kBF16, rng), up(hidden, in, DType::kBF16, rng);
    const PanelWeight pair = PanelWeight::PackGated(gate.view, up.view);
    for (std::int64_t rows : {1, 3, 17}) {
      const std::vector<float> x = RandomFloats(rows * in, rng, -2.0f, 2.0f);
      const std::vector<float> apart = GatedUnfused(*plain, x, rows, gate.view, up.view);
      const std::vector<float> fused = Gated(*plain, x, rows, pair, hidden);
      ASSERT_TRUE(BitEqual(apart.data(), fused.data(), apart.size()))
          << rows << " rows, hidden " << hidden;
    }
  }
}

// The AMX kernel combines the pair in its accumulators: the same bits as MatMul of each and
// SiluMul, for hidden sizes that are not whole groups, rows on both sides of tiles and passes, and
// any thread count (so a row's bits still do not depend on its batch).
TEST_P(Bf16ProductsMatMul, GatedPairEqualsTheProductsApartBitForBit) {
  std::mt19937 rng(23);
  auto amx = Bf16Backend(2);
  EXPECT_TRUE(amx->fuses_matmuls(DType::kBF16));
  EXPECT_FALSE(amx->fuses_matmuls(DType::kF32));
  for (auto [hidden, in] : {std::pair<std::int64_t, std::int64_t>{16, 32}, {17, 33},
                            {70, 300}, {48, 1000}, {40, 4100}}) {
    TestWeight gate(hidden, in, DType::kBF16, rng), up(hidden, in, DType::kBF16, rng);
    const PanelWeight pair = PanelWeight::PackGated(gate.view, up.view);
    for (std::int64_t rows : {1, 2, 15, 16, 17, 33, 129, 300}) {
      const std::vector<float> x = RandomFloats(rows * in, rng, -2.0f, 2.0f);
      const std::vector<float> apart = GatedUnfused(*amx, x, rows, gate.view, up.view);
      for (int threads : {1, 2, 3}) {
        auto b = Bf16Backend(threads);
        const std::vector<float> fused = Gated(*b, x, rows, pair, hidden);
        ASSERT_TRUE(BitEqual(apart.data(), fused.data(), apart.size()))
            << rows << " rows x " << hidden << "x" << in << ", " << threads << " threads";
      }
    }
  }
}

// Each part packed as tiles on its own and multiplied apart, against the stack in one call.
void ExpectStackedEqualsParts(Backend& b, const std::vector<TestWeight>& parts, std::int64_t in,
                              std::int64_t rows, std::mt19937& rng, const std::string& what) {
  std::vector<WeightView> views;
  for (const TestWeight& p : parts) views.push_back(p.view);
  const PanelWeight stacked = PanelWeight::PackStacked(views);
  const std::vector<float> x = RandomFloats(rows * in, rng, -2.0f, 2.0f);
  std::vector<std::vector<float>> got;
  std::vector<float*> outputs;
  std::vector<std::int64_t> part_rows;
  for (const WeightView& v : views) {
    got.emplace_back(rows * v.rows, NAN);
    part_rows.push_back(v.rows);
  }
  for (auto& g : got) outputs.push_back(g.data());
  b.StackedMatMul(x.data(), rows, stacked.view(), part_rows, outputs);
  for (std::size_t i = 0; i < views.size(); ++i) {
    const PanelWeight alone = PanelWeight::Pack(views[i], WeightLayout::kBf16Tiles);
    const std::vector<float> want = Multiply(b, x.data(), rows, alone.view());
    ASSERT_TRUE(BitEqual(want.data(), got[i].data(), want.size()))
        << what << ": part " << i << ", " << rows << " rows";
  }
}

TEST(StackedParts, PackInTurnAndRefuseMismatchedParts) {
  std::mt19937 rng(29);
  TestWeight a(20, 40, DType::kBF16, rng), b(7, 40, DType::kBF16, rng);
  const WeightView views[] = {a.view, b.view};
  const PanelWeight stacked = PanelWeight::PackStacked(views);
  EXPECT_EQ(stacked.view().rows, 32 + 16);
  EXPECT_EQ(stacked.view().At(19, 5), a.view.At(19, 5));
  EXPECT_EQ(stacked.view().At(25, 5), 0.0f);  // a's padding
  EXPECT_EQ(stacked.view().At(32 + 6, 39), b.view.At(6, 39));
  TestWeight other(7, 41, DType::kBF16, rng), f32(7, 40, DType::kF32, rng);
  const WeightView mismatched[] = {a.view, other.view};
  EXPECT_THROW(PanelWeight::PackStacked(mismatched), std::invalid_argument);
  const WeightView wrong_dtype[] = {a.view, f32.view};
  EXPECT_THROW(PanelWeight::PackStacked(wrong_dtype), std::invalid_argument);
}

TEST(StackedParts, TheDefaultPathEqualsThePartsApart) {
  std::mt19937 rng(31);
  auto plain = CreateCpuBackend({.num_threads = 2});
  std::vector<TestWeight> parts;
  parts.emplace_back(20, 40, DType::kBF16, rng);
  parts.emplace_back(7, 40, DType::kBF16, rng);
  parts.emplace_back(16, 40, DType::kBF16, rng);
  for (std::int64_t rows : {1, 5}) {
    ExpectStackedEqualsParts(*plain, parts, 40, rows, rng, "plain");
    if (HasFatalFailure()) return;
  }
}

// q, k, v-like stacks (parts that are and are not whole groups, a group pair straddling two
// parts) on AMX: each part's bits as multiplied alone, for any rows and threads.
TEST_P(Bf16ProductsMatMul, StackedPartsEqualThePartsApartBitForBit) {
  std::mt19937 rng(37);
  for (auto shape : std::vector<std::vector<std::int64_t>>{{64, 16, 16}, {20, 7, 33}, {48}}) {
    for (std::int64_t in : {32, 300, 1100}) {
      std::vector<TestWeight> parts;
      for (std::int64_t r : shape) parts.emplace_back(r, in, DType::kBF16, rng);
      for (int threads : {1, 2, 3}) {
        auto b = Bf16Backend(threads);
        for (std::int64_t rows : {1, 2, 17, 33, 129}) {
          ExpectStackedEqualsParts(*b, parts, in, rows, rng,
                                   std::to_string(in) + " columns, " + std::to_string(threads) +
                                       " threads");
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, Bf16ProductsMatMul,
                         ::testing::Values(Bf16MatMul::kAmx, Bf16MatMul::kAvx512Bf16),
                         [](const ::testing::TestParamInfo<Bf16MatMul>& info) {
                           return std::string(Bf16MatMulName(info.param));
                         });

}  // namespace
}  // namespace tandem::kernels
