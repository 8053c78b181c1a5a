// Paged causal GQA attention in bf16 products (the attention of CpuBackendOptions::bf16_matmul =
// kAmx on AMX tiles, and of kAvx512Bf16 with VDPBF16PS): against a bf16-product oracle, and batch
// invariance bit for bit (a query alone as in decode, inside a prefill chunk of any size, in a
// batch of sequences, on any number of threads). Each engine skips on CPUs without its
// instructions.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "kernel_test_util.h"
#include "tandem/kernels/backend.h"

namespace tandem::kernels {
namespace {

using testing::BitEqual;
using testing::GqaInputs;
using testing::GqaSequence;
using testing::GqaShape;
using testing::PagedPool;
using testing::RandomFloats;
using testing::SequenceParams;

double Bf16(float v) { return Bf16ToF32(F32ToBf16(v)); }

std::string ShapeName(const ::testing::TestParamInfo<std::tuple<GqaShape, Bf16MatMul>>& info) {
  const GqaShape& s = std::get<0>(info.param);
  return std::string(Bf16MatMulName(std::get<1>(info.param))) + "_" + std::to_string(s.n_heads) +
         "h" + std::to_string(s.n_kv_heads) + "kv" + std::to_string(s.head_dim) + "d_at" +
         std::to_string(s.start_pos) + "x" + std::to_string(s.n_tokens);
}

bool Available(Bf16MatMul mode) {
  return mode == Bf16MatMul::kAmx ? IsAmxBf16Available() : IsAvx512Bf16Available();
}

std::unique_ptr<Backend> Engine(Bf16MatMul mode, int threads) {
  return CreateCpuBackend({.num_threads = threads, .bf16_matmul = mode});
}

class Bf16Gqa : public ::testing::TestWithParam<std::tuple<GqaShape, Bf16MatMul>> {
 protected:
  void SetUp() override {
    if (!Available(Mode())) {
      GTEST_SKIP() << "this CPU (or OS) does not run " << Bf16MatMulName(Mode())
                   << ", or the build has no AVX-512 kernels";
    }
    in_ = std::make_unique<GqaInputs>(Shape());
  }
  const GqaShape& Shape() const { return std::get<0>(GetParam()); }
  Bf16MatMul Mode() const { return std::get<1>(GetParam()); }
  std::unique_ptr<Backend> Amx(int threads) const { return Engine(Mode(), threads); }
  GqaAttentionParams Params(int first_token, int n_tokens, float* out) const {
    return in_->Params(first_token, n_tokens, out);
  }

  // In double: scores of bf16-rounded queries and keys, the softmax, and the weighted sum of
  // bf16-rounded values with bf16-rounded weights.
  std::vector<double> Oracle() const {
    const GqaShape& s = Shape();
    const GqaAttentionParams p = Params(0, s.n_tokens, nullptr);
    const int group = s.n_heads / s.n_kv_heads;
    std::vector<double> out(in_->q.size());
    for (int i = 0; i < s.n_tokens; ++i) {
      const int ctx = s.start_pos + i + 1;
      for (int h = 0; h < s.n_heads; ++h) {
        const float* q = p.q + (static_cast<std::int64_t>(i) * s.n_heads + h) * s.head_dim;
        const std::int64_t head = static_cast<std::int64_t>(h / group) * s.head_dim;
        std::vector<double> score(ctx);
        double mx = -INFINITY, sum = 0.0;
        for (int t = 0; t < ctx; ++t) {
          const float* k = p.kv.TokenRow(t) + p.k_offset + head;
          double dot = 0.0;
          for (int d = 0; d < s.head_dim; ++d) dot += Bf16(q[d]) * Bf16(k[d]);
          score[t] = dot * p.scale;
          mx = std::max(mx, score[t]);
        }
        for (int t = 0; t < ctx; ++t) sum += (score[t] = std::exp(score[t] - mx));
        for (int d = 0; d < s.head_dim; ++d) {
          double acc = 0.0;
          for (int t = 0; t < ctx; ++t) {
            const float* v = p.kv.TokenRow(t) + p.v_offset + head;
            acc += Bf16(static_cast<float>(score[t] / sum)) * Bf16(v[d]);
          }
          out[(static_cast<std::size_t>(i) * s.n_heads + h) * s.head_dim + d] = acc;
        }
      }
    }
    return out;
  }

  std::unique_ptr<GqaInputs> in_;
};

// Values lie in [-1, 1] and the weights sum to 1, so outputs are bounded by 1; the oracle rounds
// exact weights to bf16 where the kernel rounds float32 ones, which can differ by one bf16 step
// (2^-8 relative) per weight: at most 2^-8 in all.
TEST_P(Bf16Gqa, MatchesTheBf16ProductOracle) {
  std::vector<float> got(in_->q.size(), NAN);
  Amx(2)->GqaAttention(Params(0, Shape().n_tokens, got.data()));
  const std::vector<double> want = Oracle();
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1.0 / 256) << "output " << i;
  }
}

TEST_P(Bf16Gqa, TokenAloneEqualsTokenInChunkOnAnyThreads) {
  const GqaShape& s = Shape();
  auto amx = Amx(2);
  std::vector<float> chunk(in_->q.size(), NAN);
  amx->GqaAttention(Params(0, s.n_tokens, chunk.data()));
  const std::size_t per_token = static_cast<std::size_t>(s.n_heads) * s.head_dim;
  for (int i = 0; i < s.n_tokens; ++i) {
    std::vector<float> alone(per_token, NAN);
    amx->GqaAttention(Params(i, 1, alone.data()));
    ASSERT_TRUE(BitEqual(alone.data(), chunk.data() + i * per_token, per_token)) << "token " << i;
  }
  for (int split : {1, 7, 17}) {  // the chunk cut in two at another place
    if (split >= s.n_tokens) continue;
    std::vector<float> two(in_->q.size(), NAN);
    amx->GqaAttention(Params(0, split, two.data()));
    amx->GqaAttention(Params(split, s.n_tokens - split, two.data() + split * per_token));
    ASSERT_TRUE(BitEqual(two.data(), chunk.data(), chunk.size())) << "split at " << split;
  }
  for (int threads : {1, 3, 8}) {
    std::vector<float> again(in_->q.size(), NAN);
    Amx(threads)->GqaAttention(Params(0, s.n_tokens, again.data()));
    ASSERT_TRUE(BitEqual(again.data(), chunk.data(), chunk.size())) << threads << " threads";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Bf16Gqa,
    ::testing::Combine(
        ::testing::Values(GqaShape{8, 8, 8, 16, 0, 5},       // tiny head_dim: one padded chunk
                          GqaShape{16, 4, 64, 16, 0, 67},    // the 287M Llama's heads
                          GqaShape{8, 1, 128, 8, 37, 20},    // MQA, head_dim 128, after a prefix
                          GqaShape{8, 2, 40, 16, 300, 33},   // head_dim 40: partial chunks, tiles
                          GqaShape{4, 4, 64, 16, 1000, 3}),  // MHA, long context, a few tokens
        ::testing::Values(Bf16MatMul::kAmx, Bf16MatMul::kAvx512Bf16)),
    ShapeName);

class Bf16GqaBatch : public ::testing::TestWithParam<Bf16MatMul> {};

TEST_P(Bf16GqaBatch, EqualsPerSequenceCallsBitForBit) {
  if (!Available(GetParam())) GTEST_SKIP() << "no " << Bf16MatMulName(GetParam()) << " here";
  constexpr int kHeads = 8, kKvHeads = 2, kHeadDim = 64;
  std::mt19937 rng(99);
  std::vector<GqaSequence> seqs;
  for (auto [start, n] :
       std::vector<std::pair<int, int>>{{300, 1}, {0, 1}, {57, 1}, {12, 6}, {700, 1}, {0, 40}}) {
    seqs.push_back({std::make_unique<PagedPool>(16, 2LL * kKvHeads * kHeadDim, start + n, rng),
                    RandomFloats(static_cast<std::size_t>(n) * kHeads * kHeadDim, rng), start, n});
  }
  auto params = [&](GqaSequence& s, float* out) {
    return SequenceParams(s, kHeads, kKvHeads, kHeadDim, out);
  };
  auto amx = Engine(GetParam(), 2);
  std::vector<std::vector<float>> batched(seqs.size());
  std::vector<GqaAttentionParams> batch;
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    batched[i].assign(seqs[i].q.size(), NAN);
    batch.push_back(params(seqs[i], batched[i].data()));
  }
  amx->GqaAttentionBatch(batch);
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    std::vector<float> alone(seqs[i].q.size(), NAN);
    amx->GqaAttention(params(seqs[i], alone.data()));
    EXPECT_TRUE(BitEqual(alone.data(), batched[i].data(), alone.size())) << "sequence " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, Bf16GqaBatch,
                         ::testing::Values(Bf16MatMul::kAmx, Bf16MatMul::kAvx512Bf16),
                         [](const ::testing::TestParamInfo<Bf16MatMul>& info) {
                           return std::string(Bf16MatMulName(info.param));
                         });

}  // namespace
}  // namespace tandem::kernels
