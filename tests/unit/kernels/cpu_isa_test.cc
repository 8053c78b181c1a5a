// The fast backend's ISA copies (kernels/cpu/simd/isa.h): which ones this binary and CPU run, how
// one is chosen, and that the AVX2 and AVX-512 copies give the same bits, so that replicas on
// different CPUs of one deployment produce the same tokens and can share each other's KV.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "tandem/kernels/backend.h"
#include "tandem/kernels/panels.h"

namespace tandem::kernels {
namespace {

using testing::BitEqual;
using testing::PagedPool;
using testing::RandomFloats;
using testing::TestWeight;

TEST(CpuIsaSelection, NamesRoundTrip) {
  for (CpuIsa isa : {CpuIsa::kAuto, CpuIsa::kGeneric, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    EXPECT_EQ(ParseCpuIsa(CpuIsaName(isa)), isa);
  }
  EXPECT_EQ(ParseCpuIsa("AVX2"), std::nullopt);
  EXPECT_EQ(ParseCpuIsa("avx1024"), std::nullopt);
  EXPECT_EQ(ParseCpuIsa(""), std::nullopt);
}

TEST(CpuIsaSelection, GenericAlwaysRunsAndAutoPicksTheBest) {
  const std::vector<CpuIsa> available = AvailableCpuIsas();
  ASSERT_FALSE(available.empty());
  EXPECT_EQ(available.front(), CpuIsa::kGeneric);
  for (std::size_t i = 1; i < available.size(); ++i) EXPECT_LT(available[i - 1], available[i]);
  EXPECT_EQ(ResolveCpuIsa(CpuIsa::kAuto), available.back());
  EXPECT_EQ(CreateCpuBackend({})->name(), "cpu-" + std::string(CpuIsaName(available.back())));
  for (CpuIsa isa : available) {
    EXPECT_EQ(ResolveCpuIsa(isa), isa);
    EXPECT_EQ(CreateCpuBackend({.num_threads = 1, .isa = isa})->name(),
              "cpu-" + std::string(CpuIsaName(isa)));
  }
}

TEST(CpuIsaSelection, AnIsaThisMachineCannotRunIsRefused) {
  int refused = 0;
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (IsCpuIsaAvailable(isa)) continue;
    EXPECT_THROW(CreateCpuBackend({.isa = isa}), std::invalid_argument) << CpuIsaName(isa);
    ++refused;
  }
  if (refused == 0) GTEST_SKIP() << "this binary and CPU run every ISA copy";
}

// Runs `op` on a backend of each ISA and expects the outputs to be bit-identical.
void ExpectSameBits(CpuIsa a, CpuIsa b, const std::string& what,
                    const std::function<std::vector<float>(Backend&)>& op) {
  auto first = CreateCpuBackend({.num_threads = 2, .isa = a});
  auto second = CreateCpuBackend({.num_threads = 2, .isa = b});
  const std::vector<float> x = op(*first), y = op(*second);
  ASSERT_EQ(x.size(), y.size()) << what;
  EXPECT_TRUE(BitEqual(x.data(), y.data(), x.size())) << what;
}

class SimdCopies : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!IsCpuIsaAvailable(CpuIsa::kAvx2) || !IsCpuIsaAvailable(CpuIsa::kAvx512)) {
      GTEST_SKIP() << "needs both the AVX2 and the AVX-512 copy (this CPU or build lacks one)";
    }
  }
  std::mt19937 rng_{2024};
};

TEST_F(SimdCopies, MatMulOfEveryDtypeAndShape) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3}) {
    for (auto [out, in] : {std::pair<std::int64_t, std::int64_t>{67, 257}, {7, 1100}, {131, 64}}) {
      TestWeight w(out, in, dtype, rng_);
      const PanelWeight panels = PanelWeight::Pack(w.view);
      for (std::int64_t rows : {1, 3, 4, 5, 16, 33}) {
        const std::vector<float> x = RandomFloats(rows * in, rng_);
        for (const WeightView* view : {static_cast<const WeightView*>(&w.view), &panels.view()}) {
          ExpectSameBits(CpuIsa::kAvx2, CpuIsa::kAvx512,
                         std::string(DTypeName(dtype)) + " " + std::to_string(rows) + "x" +
                             std::to_string(out) + "x" + std::to_string(in) +
                             (view == &w.view ? " rows" : " panels"),
                         [&](Backend& b) {
                           std::vector<float> y(rows * out, NAN);
                           b.MatMul(x.data(), rows, *view, y.data());
                           return y;
                         });
        }
      }
    }
  }
}

TEST_F(SimdCopies, GqaAttentionPrefillAndDecode) {
  constexpr int kHeads = 8, kKvHeads = 2, kHeadDim = 64, kBlock = 16;
  for (auto [start, tokens] : {std::pair<int, int>{0, 37}, {50, 1}, {29, 5}}) {
    PagedPool pool(kBlock, 2LL * kKvHeads * kHeadDim, start + tokens, rng_);
    const std::vector<float> q = RandomFloats(static_cast<std::size_t>(tokens) * kHeads * kHeadDim,
                                              rng_, -2.0f, 2.0f);
    ExpectSameBits(CpuIsa::kAvx2, CpuIsa::kAvx512, "gqa from " + std::to_string(start),
                   [&](Backend& b) {
                     std::vector<float> out(q.size(), NAN);
                     GqaAttentionParams p;
                     p.q = q.data();
                     p.out = out.data();
                     p.n_tokens = tokens;
                     p.start_pos = start;
                     p.n_heads = kHeads;
                     p.n_kv_heads = kKvHeads;
                     p.head_dim = kHeadDim;
                     p.scale = 0.125f;
                     p.kv = pool.Layer();
                     p.k_offset = 0;
                     p.v_offset = kKvHeads * kHeadDim;
                     b.GqaAttention(p);
                     return out;
                   });
  }
}

TEST_F(SimdCopies, MlaAttentionPrefillAndDecode) {
  constexpr int kHeads = 4, kRank = 96, kRopeDim = 32, kBlock = 16;
  for (auto [start, tokens] : {std::pair<int, int>{0, 21}, {40, 1}}) {
    PagedPool pool(kBlock, kRank + kRopeDim, start + tokens, rng_);
    const std::vector<float> q_latent =
        RandomFloats(static_cast<std::size_t>(tokens) * kHeads * kRank, rng_);
    const std::vector<float> q_rope =
        RandomFloats(static_cast<std::size_t>(tokens) * kHeads * kRopeDim, rng_);
    ExpectSameBits(CpuIsa::kAvx2, CpuIsa::kAvx512, "mla from " + std::to_string(start),
                   [&](Backend& b) {
                     std::vector<float> out(q_latent.size(), NAN);
                     MlaAttentionParams p;
                     p.q_latent = q_latent.data();
                     p.q_rope = q_rope.data();
                     p.out_latent = out.data();
                     p.n_tokens = tokens;
                     p.start_pos = start;
                     p.n_heads = kHeads;
                     p.kv_lora_rank = kRank;
                     p.rope_dim = kRopeDim;
                     p.scale = 0.1f;
                     p.kv = pool.Layer();
                     b.MlaAttention(p);
                     return out;
                   });
  }
}

TEST_F(SimdCopies, RowWiseOps) {
  constexpr std::int64_t kRows = 5, kDim = 259;
  const std::vector<float> x = RandomFloats(kRows * kDim, rng_, -4.0f, 4.0f);
  const std::vector<float> gate = RandomFloats(kRows * kDim, rng_, -30.0f, 30.0f);
  const std::vector<float> norm = RandomFloats(kDim, rng_);
  const WeightView norm_view{norm.data(), DType::kF32, 1, kDim};
  ExpectSameBits(CpuIsa::kAvx2, CpuIsa::kAvx512, "rmsnorm", [&](Backend& b) {
    std::vector<float> y(x.size(), NAN);
    b.RmsNorm(x.data(), kRows, kDim, norm_view, 1e-5f, y.data());
    return y;
  });
  ExpectSameBits(CpuIsa::kAvx2, CpuIsa::kAvx512, "silu-mul", [&](Backend& b) {
    std::vector<float> y(x.size(), NAN);
    b.SiluMul(gate.data(), x.data(), kRows, kDim, y.data());
    return y;
  });
  ExpectSameBits(CpuIsa::kAvx2, CpuIsa::kAvx512, "layernorm + gelu", [&](Backend& b) {
    std::vector<float> y(x.size(), NAN), g(x.size(), NAN);
    b.LayerNorm(x.data(), kRows, kDim, norm_view, norm_view, 1e-6f, y.data());
    b.Gelu(y.data(), kRows * kDim, GeluForm::kTanh, g.data());
    return g;
  });
  constexpr int kHeads = 3, kHeadDim = 64, kRopeDim = 32;
  const std::vector<float> cos = RandomFloats(kRows * kRopeDim / 2, rng_);
  const std::vector<float> sin = RandomFloats(kRows * kRopeDim / 2, rng_);
  const std::vector<float> qk = RandomFloats(kRows * kHeads * kHeadDim, rng_);
  for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kHalfSplit}) {
    ExpectSameBits(CpuIsa::kAvx2, CpuIsa::kAvx512, "rope", [&](Backend& b) {
      std::vector<float> y = qk;
      b.Rope(y.data(), kRows, kHeads, kHeadDim, kRopeDim, cos.data(), sin.data(), layout);
      return y;
    });
  }
}

TEST_F(SimdCopies, EncoderFullAttention) {
  constexpr int kTokens = 45, kHeads = 2, kHeadDim = 32;
  const std::vector<float> qkv = RandomFloats(3 * kTokens * kHeads * kHeadDim, rng_);
  ExpectSameBits(CpuIsa::kAvx2, CpuIsa::kAvx512, "full attention", [&](Backend& b) {
    std::vector<float> out(kTokens * kHeads * kHeadDim, NAN);
    FullAttentionParams p;
    p.q = qkv.data();
    p.k = qkv.data() + kHeadDim * kHeads;
    p.v = qkv.data() + 2 * kHeadDim * kHeads;
    p.q_stride = 3 * kHeads * kHeadDim;
    p.kv_stride = 3 * kHeads * kHeadDim;
    p.out = out.data();
    p.out_stride = kHeads * kHeadDim;
    p.n_tokens = kTokens;
    p.n_heads = kHeads;
    p.head_dim = kHeadDim;
    p.scale = 0.17f;
    b.FullAttention(p);
    return out;
  });
}

}  // namespace
}  // namespace tandem::kernels
