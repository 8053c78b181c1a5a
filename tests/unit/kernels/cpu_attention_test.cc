// Fast CPU paged attention (GQA and MLA) against the reference backend, on shuffled block tables,
// and its batch invariance: a query's output is the same alone or inside a prefill chunk. Every
// ISA copy of the kernels this binary and CPU can run is tested, not only the one auto picks.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <span>
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

std::vector<float> OnesLike(const std::vector<float>& v) {
  return std::vector<float>(v.size(), 1.0f);
}

// A case over (shape, ISA copy): the fast backends it builds run that copy.
template <typename Shape>
class IsaCase : public ::testing::TestWithParam<std::tuple<Shape, CpuIsa>> {
 protected:
  const Shape& shape() const { return std::get<0>(this->GetParam()); }
  std::unique_ptr<Backend> Fast(int threads) const {
    return CreateCpuBackend({.num_threads = threads, .isa = std::get<1>(this->GetParam())});
  }
};

class GqaCase : public IsaCase<GqaShape> {
 protected:
  void SetUp() override { in_ = std::make_unique<GqaInputs>(shape()); }
  GqaAttentionParams Params(int first_token, int n_tokens, float* out) const {
    return in_->Params(first_token, n_tokens, out);
  }

  std::unique_ptr<GqaInputs> in_;
};

TEST_P(GqaCase, MatchesReference) {
  std::vector<float> got(in_->q.size(), NAN), want(in_->q.size(), NAN);
  Fast(2)->GqaAttention(Params(0, shape().n_tokens, got.data()));
  CreateReferenceCpuBackend()->GqaAttention(Params(0, shape().n_tokens, want.data()));
  // V entries lie in [-1, 1], so every output is a convex combination bounded by 1.
  testing::ExpectClose(got, want, OnesLike(want), 1e-5f);
}

TEST_P(GqaCase, TokenAloneEqualsTokenInChunk) {
  const GqaShape& s = shape();
  auto fast = Fast(2);
  std::vector<float> chunk(in_->q.size(), NAN);
  fast->GqaAttention(Params(0, s.n_tokens, chunk.data()));
  const std::size_t per_token = static_cast<std::size_t>(s.n_heads) * s.head_dim;
  for (int i = 0; i < s.n_tokens; ++i) {
    std::vector<float> alone(per_token, NAN);
    fast->GqaAttention(Params(i, 1, alone.data()));
    EXPECT_TRUE(BitEqual(alone.data(), chunk.data() + i * per_token, per_token)) << "token " << i;
  }
  std::vector<float> single_thread(in_->q.size(), NAN);
  Fast(1)->GqaAttention(Params(0, s.n_tokens, single_thread.data()));
  EXPECT_TRUE(BitEqual(single_thread.data(), chunk.data(), chunk.size()));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GqaCase,
    ::testing::Combine(
        ::testing::Values(GqaShape{8, 8, 8, 16, 0, 5},      // stories260K-like MHA, tiny head_dim
                          GqaShape{8, 2, 64, 16, 37, 16},   // GQA groups of 4, prefill chunk
                          GqaShape{6, 3, 19, 7, 100, 3},    // odd head_dim and block size
                          GqaShape{4, 1, 128, 32, 300, 9},  // MQA, long context: threaded
                          GqaShape{8, 1, 64, 16, 500, 1},   // MQA decode: heads split over threads
                          GqaShape{2, 2, 33, 4, 0, 1},      // first token
                          // Prefill chunks whose scores go by transposed keys (head_dim whole
                          // 16-float chunks, enough queries per KV head), the last group cut:
                          GqaShape{4, 4, 32, 16, 21, 40},  // MHA
                          GqaShape{16, 4, 16, 8, 5, 12}),  // one chunk per head
        ::testing::ValuesIn(AvailableCpuIsas())),
    (testing::IsaParamName<GqaCase::ParamType, 1>));

struct MlaShape {
  int n_heads, rank, rope_dim, block_size, start_pos, n_tokens;
};

class MlaCase : public IsaCase<MlaShape> {
 protected:
  void SetUp() override {
    const MlaShape& s = shape();
    std::mt19937 rng(s.rank + s.start_pos);
    pool_ = std::make_unique<PagedPool>(s.block_size, s.rank + s.rope_dim, s.start_pos + s.n_tokens,
                                        rng);
    q_latent_ = RandomFloats(static_cast<std::size_t>(s.n_tokens) * s.n_heads * s.rank, rng);
    q_rope_ = RandomFloats(static_cast<std::size_t>(s.n_tokens) * s.n_heads * s.rope_dim, rng);
  }

  MlaAttentionParams Params(int first_token, int n_tokens, float* out) const {
    const MlaShape& s = shape();
    MlaAttentionParams p;
    const std::size_t pairs = static_cast<std::size_t>(first_token) * s.n_heads;
    p.q_latent = q_latent_.data() + pairs * s.rank;
    p.q_rope = q_rope_.data() + pairs * s.rope_dim;
    p.out_latent = out;
    p.n_tokens = n_tokens;
    p.start_pos = s.start_pos + first_token;
    p.n_heads = s.n_heads;
    p.kv_lora_rank = s.rank;
    p.rope_dim = s.rope_dim;
    p.scale = 1.0f / std::sqrt(static_cast<float>(s.rank + s.rope_dim)) * 2.0f;
    p.kv = pool_->Layer();
    return p;
  }

  std::unique_ptr<PagedPool> pool_;
  std::vector<float> q_latent_, q_rope_;
};

TEST_P(MlaCase, MatchesReference) {
  std::vector<float> got(q_latent_.size(), NAN), want(q_latent_.size(), NAN);
  Fast(2)->MlaAttention(Params(0, shape().n_tokens, got.data()));
  CreateReferenceCpuBackend()->MlaAttention(Params(0, shape().n_tokens, want.data()));
  testing::ExpectClose(got, want, OnesLike(want), 1e-5f);
}

TEST_P(MlaCase, TokenAloneEqualsTokenInChunk) {
  const MlaShape& s = shape();
  auto fast = Fast(2);
  std::vector<float> chunk(q_latent_.size(), NAN);
  fast->MlaAttention(Params(0, s.n_tokens, chunk.data()));
  const std::size_t per_token = static_cast<std::size_t>(s.n_heads) * s.rank;
  for (int i = 0; i < s.n_tokens; ++i) {
    std::vector<float> alone(per_token, NAN);
    fast->MlaAttention(Params(i, 1, alone.data()));
    EXPECT_TRUE(BitEqual(alone.data(), chunk.data() + i * per_token, per_token)) << "token " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MlaCase,
    ::testing::Combine(::testing::Values(MlaShape{16, 512, 64, 64, 70, 4},  // DeepSeek dims
                                         MlaShape{3, 37, 6, 5, 11, 6},      // odd everything
                                         MlaShape{4, 64, 16, 16, 0, 8}),
                       ::testing::ValuesIn(AvailableCpuIsas())),
    (testing::IsaParamName<MlaCase::ParamType, 1>));

// The batched call of every ISA copy against the same copy's per-sequence calls, bit for bit
// (batching must not change a sequence's result), and against the reference. make(i, out) gives
// sequence i's params, writing its sizes[i] output floats to out.
template <typename Params, typename Make>
void ExpectBatchEqualsPerSequence(const std::vector<std::size_t>& sizes, Make make,
                                  void (Backend::*batch)(std::span<const Params>),
                                  void (Backend::*single)(const Params&)) {
  auto ref = CreateReferenceCpuBackend();
  std::vector<std::vector<float>> want(sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    want[i].assign(sizes[i], NAN);
    (ref.get()->*single)(make(i, want[i].data()));
  }
  for (CpuIsa isa : AvailableCpuIsas()) {
    SCOPED_TRACE(CpuIsaName(isa));
    auto fast = CreateCpuBackend({.num_threads = 2, .isa = isa});
    // Fresh NaN outputs per copy, so that one left unwritten cannot pass on the last copy's values.
    std::vector<std::vector<float>> batched(sizes.size());
    std::vector<Params> params;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      batched[i].assign(sizes[i], NAN);
      params.push_back(make(i, batched[i].data()));
    }
    (fast.get()->*batch)(params);
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      std::vector<float> alone(sizes[i], NAN);
      (fast.get()->*single)(make(i, alone.data()));
      EXPECT_TRUE(BitEqual(alone.data(), batched[i].data(), alone.size())) << "sequence " << i;
      testing::ExpectClose(batched[i], want[i], OnesLike(want[i]), 1e-5f);
    }
  }
}

TEST(GqaAttentionBatch, EqualsPerSequenceCallsBitForBit) {
  constexpr int kHeads = 8, kKvHeads = 2, kHeadDim = 40;
  std::mt19937 rng(99);
  const std::vector<std::pair<int, int>> shapes = {{300, 1}, {0, 1}, {57, 1}, {12, 6}, {700, 1}};
  std::vector<GqaSequence> seqs;
  for (auto [start, n] : shapes) {
    GqaSequence s;
    s.pool = std::make_unique<PagedPool>(16, 2LL * kKvHeads * kHeadDim, start + n, rng);
    s.q = RandomFloats(static_cast<std::size_t>(n) * kHeads * kHeadDim, rng);
    s.start_pos = start;
    s.n_tokens = n;
    seqs.push_back(std::move(s));
  }
  std::vector<std::size_t> sizes;
  for (const GqaSequence& s : seqs) sizes.push_back(s.q.size());
  ExpectBatchEqualsPerSequence(
      sizes,
      [&](std::size_t i, float* out) {
        return SequenceParams(seqs[i], kHeads, kKvHeads, kHeadDim, out);
      },
      &Backend::GqaAttentionBatch, &Backend::GqaAttention);
}

TEST(GqaAttentionBatch, MixedHeadLayoutsFallBackToPerSequence) {
  std::mt19937 rng(5);
  GqaSequence a{std::make_unique<PagedPool>(8, 2 * 2 * 16, 40, rng), RandomFloats(4 * 16, rng),
                39, 1};
  GqaSequence b{std::make_unique<PagedPool>(8, 2 * 1 * 24, 90, rng), RandomFloats(2 * 24, rng),
                89, 1};
  auto ref = CreateReferenceCpuBackend();
  std::vector<float> want_a(a.q.size()), want_b(b.q.size());
  ref->GqaAttention(SequenceParams(a, 4, 2, 16, want_a.data()));
  ref->GqaAttention(SequenceParams(b, 2, 1, 24, want_b.data()));
  for (CpuIsa isa : AvailableCpuIsas()) {
    SCOPED_TRACE(CpuIsaName(isa));
    std::vector<float> out_a(a.q.size(), NAN), out_b(b.q.size(), NAN);
    const std::vector<GqaAttentionParams> params = {SequenceParams(a, 4, 2, 16, out_a.data()),
                                                    SequenceParams(b, 2, 1, 24, out_b.data())};
    CreateCpuBackend({.num_threads = 2, .isa = isa})->GqaAttentionBatch(params);
    testing::ExpectClose(out_a, want_a, OnesLike(want_a), 1e-5f);
    testing::ExpectClose(out_b, want_b, OnesLike(want_b), 1e-5f);
  }
}

TEST(MlaAttentionBatch, EqualsPerSequenceCallsBitForBit) {
  constexpr int kHeads = 4, kRank = 96, kRope = 16;
  std::mt19937 rng(123);
  const std::vector<std::pair<int, int>> shapes = {{200, 1}, {3, 4}, {511, 1}};
  std::vector<std::unique_ptr<PagedPool>> pools;
  std::vector<std::vector<float>> ql, qr;
  for (auto [start, n] : shapes) {
    pools.push_back(std::make_unique<PagedPool>(32, kRank + kRope, start + n, rng));
    ql.push_back(RandomFloats(static_cast<std::size_t>(n) * kHeads * kRank, rng));
    qr.push_back(RandomFloats(static_cast<std::size_t>(n) * kHeads * kRope, rng));
  }
  auto make = [&](std::size_t i, float* out) {
    MlaAttentionParams p;
    p.q_latent = ql[i].data();
    p.q_rope = qr[i].data();
    p.out_latent = out;
    p.n_tokens = shapes[i].second;
    p.start_pos = shapes[i].first;
    p.n_heads = kHeads;
    p.kv_lora_rank = kRank;
    p.rope_dim = kRope;
    p.scale = 0.1f;
    p.kv = pools[i]->Layer();
    return p;
  };
  std::vector<std::size_t> sizes;
  for (const std::vector<float>& q : ql) sizes.push_back(q.size());
  ExpectBatchEqualsPerSequence(sizes, make, &Backend::MlaAttentionBatch, &Backend::MlaAttention);
}

}  // namespace
}  // namespace tandem::kernels
