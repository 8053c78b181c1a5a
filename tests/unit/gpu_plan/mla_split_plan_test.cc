#include "tandem/gpu_plan/mla_split_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace tandem::gpu_plan {
namespace {

std::int64_t Cost(const MlaChunk& c, const MlaSplitOptions& o) {
  return (c.kv_end - c.kv_begin) + o.chunk_overhead_tokens;
}

TEST(MlaSplitPlanTest, ChunksCoverEachSequenceInOrder) {
  const MlaSplitOptions o{.block_size = 64, .chunk_blocks = 2, .num_ctas = 5};
  const std::vector<int> lens = {1, 128, 129, 1000};
  absl::StatusOr<MlaSplitPlan> plan = PlanMlaSplit(lens, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->chunk_tokens, 128);
  ASSERT_EQ(plan->seq_chunk_begin.size(), lens.size() + 1);
  for (std::size_t b = 0; b < lens.size(); ++b) {
    const std::span<const MlaChunk> cs = plan->ChunksOf(static_cast<int>(b));
    ASSERT_EQ(cs.size(), static_cast<std::size_t>((lens[b] + 127) / 128)) << b;
    int pos = 0;
    for (std::size_t i = 0; i < cs.size(); ++i) {
      EXPECT_EQ(cs[i].seq, static_cast<int>(b));
      EXPECT_EQ(cs[i].index, static_cast<int>(i));
      EXPECT_EQ(cs[i].kv_begin, pos);
      EXPECT_GT(cs[i].kv_end, cs[i].kv_begin);
      EXPECT_LE(cs[i].kv_end - cs[i].kv_begin, 128);
      pos = cs[i].kv_end;
    }
    EXPECT_EQ(pos, lens[b]);
  }
}

// The property batch invariance rests on: a sequence is cut the same way whatever else is in the
// batch and wherever it sits.
TEST(MlaSplitPlanTest, SequenceChunksDoNotDependOnTheBatch) {
  const MlaSplitOptions o{.block_size = 64, .chunk_blocks = 4, .num_ctas = 132};
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> len(1, 20000);
  const int probe = 7777;
  const std::vector<int> alone_lens = {probe};
  absl::StatusOr<MlaSplitPlan> alone = PlanMlaSplit(alone_lens, o);
  ASSERT_TRUE(alone.ok());
  for (int batch : {2, 3, 17, 64, 300}) {
    std::vector<int> lens(batch);
    for (int& l : lens) l = len(rng);
    const int at = static_cast<int>(rng() % batch);
    lens[at] = probe;
    absl::StatusOr<MlaSplitPlan> plan = PlanMlaSplit(lens, o);
    ASSERT_TRUE(plan.ok());
    const std::span<const MlaChunk> got = plan->ChunksOf(at);
    const std::span<const MlaChunk> want = alone->ChunksOf(0);
    ASSERT_EQ(got.size(), want.size()) << "batch " << batch;
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].kv_begin, want[i].kv_begin);
      EXPECT_EQ(got[i].kv_end, want[i].kv_end);
    }
  }
}

TEST(MlaSplitPlanTest, CtasTakeContiguousBalancedRuns) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    const MlaSplitOptions o{.block_size = 64,
                            .chunk_blocks = 1 + static_cast<int>(rng() % 8),
                            .num_ctas = 1 + static_cast<int>(rng() % 150),
                            .chunk_overhead_tokens = static_cast<int>(rng() % 100)};
    std::vector<int> lens(1 + rng() % 200);
    for (int& l : lens) l = 1 + static_cast<int>(rng() % 9000);
    absl::StatusOr<MlaSplitPlan> plan = PlanMlaSplit(lens, o);
    ASSERT_TRUE(plan.ok());
    ASSERT_EQ(plan->num_ctas(), o.num_ctas);
    EXPECT_EQ(plan->cta_chunk_begin.front(), 0);
    EXPECT_EQ(plan->cta_chunk_begin.back(), static_cast<int>(plan->chunks.size()));
    std::int64_t total = 0, max_chunk = 0;
    for (const MlaChunk& c : plan->chunks) {
      total += Cost(c, o);
      max_chunk = std::max(max_chunk, Cost(c, o));
    }
    const std::int64_t share = (total + o.num_ctas - 1) / o.num_ctas;
    for (int c = 0; c < o.num_ctas; ++c) {
      ASSERT_LE(plan->cta_chunk_begin[c], plan->cta_chunk_begin[c + 1]);
      std::int64_t load = 0;
      for (int i = plan->cta_chunk_begin[c]; i < plan->cta_chunk_begin[c + 1]; ++i) {
        load += Cost(plan->chunks[i], o);
      }
      EXPECT_LT(load, share + max_chunk) << "trial " << trial << " cta " << c;
    }
  }
}

TEST(MlaSplitPlanTest, RefusesBadInput) {
  const std::vector<int> zero = {3, 0};
  EXPECT_FALSE(PlanMlaSplit(zero, MlaSplitOptions{}).ok());
  const std::vector<int> ok = {3};
  EXPECT_FALSE(PlanMlaSplit(ok, MlaSplitOptions{.num_ctas = 0}).ok());
  EXPECT_FALSE(PlanMlaSplit(ok, MlaSplitOptions{.block_size = 0}).ok());
  EXPECT_FALSE(PlanMlaSplit(ok, MlaSplitOptions{.block_size = 1 << 20, .chunk_blocks = 1 << 12})
                   .ok());
  const std::vector<int> none;
  absl::StatusOr<MlaSplitPlan> empty = PlanMlaSplit(none, MlaSplitOptions{.num_ctas = 4});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->cta_chunk_begin, std::vector<int>(5, 0));
}

// Attention of one query over values v_t with scores s_t, whole or as chunk partials (out_i,
// lse_i) written as a split kernel writes them.
struct Attn {
  std::vector<float> out;
  float lse;
};
Attn Attend(const std::vector<float>& s, const std::vector<float>& v, int dim, int begin, int end) {
  float m = -INFINITY;
  for (int t = begin; t < end; ++t) m = std::max(m, s[t]);
  float l = 0.0f;
  std::vector<float> o(dim, 0.0f);
  for (int t = begin; t < end; ++t) {
    const float p = std::exp(s[t] - m);
    l += p;
    for (int d = 0; d < dim; ++d) o[d] += p * v[t * dim + d];
  }
  for (float& x : o) x /= l;
  return {o, m + std::log(l)};
}

TEST(MlaSplitPlanTest, CombineOfChunksEqualsWholeAttention) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  const int dim = 16;
  for (int len : {1, 64, 65, 700, 4096}) {
    std::vector<float> s(len), v(static_cast<std::size_t>(len) * dim);
    for (float& x : s) x = dist(rng);
    for (float& x : v) x = dist(rng) / 3.0f;
    const std::vector<int> lens = {len};
    absl::StatusOr<MlaSplitPlan> plan =
        PlanMlaSplit(lens, MlaSplitOptions{.block_size = 64, .chunk_blocks = 1, .num_ctas = 8});
    ASSERT_TRUE(plan.ok());
    std::vector<float> partials, lses;
    for (const MlaChunk& c : plan->ChunksOf(0)) {
      const Attn a = Attend(s, v, dim, c.kv_begin, c.kv_end);
      partials.insert(partials.end(), a.out.begin(), a.out.end());
      lses.push_back(a.lse);
    }
    std::vector<float> got(dim);
    CombineChunkPartials(partials, lses, dim, got);
    const Attn whole = Attend(s, v, dim, 0, len);
    float scale = 0.0f;
    for (float x : v) scale = std::max(scale, std::abs(x));
    for (int d = 0; d < dim; ++d) {
      EXPECT_NEAR(got[d], whole.out[d], 1e-5f * scale) << "len " << len << " d " << d;
    }
    if (lses.size() == 1) {
      EXPECT_EQ(std::memcmp(got.data(), partials.data(), dim * sizeof(float)), 0)
          << "one chunk must pass through exactly";
    }
  }
}

}  // namespace
}  // namespace tandem::gpu_plan
