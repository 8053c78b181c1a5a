#include "attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "simd.h"
#include "simd_math.h"

namespace tandem::kernels::cpu {
namespace {

// Below this many multiply-adds (scores plus weighted sum) a call stays on the calling thread.
constexpr std::int64_t kParallelMacs = 1 << 16;

// out[d0, d0 + 16 C) (clipped to dim) = sum_t a[t] * value(t)[d], accumulated in registers in
// t order, one FMA per term, starting from zero: the order behind every output element.
template <int C>
void WeightedChunks(const float* a, const float* const* rows, std::int64_t value_offset, int ctx,
                    std::int64_t d0, std::int64_t dim, float* out) {
  F32x16 acc[C];
  for (int c = 0; c < C; ++c) acc[c] = Zero();
  const int last_width = static_cast<int>(std::min<std::int64_t>(kLanes, dim - d0 - (C - 1) * kLanes));
  for (int t = 0; t < ctx; ++t) {
    const F32x16 at = Splat(a[t]);
    const float* v = rows[t] + value_offset + d0;
#pragma GCC unroll 4
    for (int c = 0; c < C - 1; ++c) acc[c] = Fma(at, Load(v + c * kLanes), acc[c]);
    const F32x16 tail = last_width == kLanes ? Load(v + (C - 1) * kLanes)
                                             : LoadPartial(v + (C - 1) * kLanes, last_width);
    acc[C - 1] = Fma(at, tail, acc[C - 1]);
  }
  for (int c = 0; c < C - 1; ++c) Store(out + d0 + c * kLanes, acc[c]);
  if (last_width == kLanes) {
    Store(out + d0 + (C - 1) * kLanes, acc[C - 1]);
  } else {
    StorePartial(out + d0 + (C - 1) * kLanes, acc[C - 1], last_width);
  }
}

void WeightedRows(const float* a, const float* const* rows, std::int64_t value_offset, int ctx,
                  std::int64_t dim, float* out) {
  constexpr int kMaxChunks = 4;  // accumulators held in registers per pass over the context
  for (std::int64_t d0 = 0; d0 < dim; d0 += kMaxChunks * kLanes) {
    const std::int64_t chunks = std::min<std::int64_t>(kMaxChunks, (dim - d0 + kLanes - 1) / kLanes);
    switch (chunks) {
      case 1: WeightedChunks<1>(a, rows, value_offset, ctx, d0, dim, out); break;
      case 2: WeightedChunks<2>(a, rows, value_offset, ctx, d0, dim, out); break;
      case 3: WeightedChunks<3>(a, rows, value_offset, ctx, d0, dim, out); break;
      default: WeightedChunks<4>(a, rows, value_offset, ctx, d0, dim, out); break;
    }
  }
}

// Total multiply-adds of a causal chunk: sum over queries of context length, times per-token work.
std::int64_t CausalWork(int n_tokens, int start_pos, std::int64_t per_token_pair) {
  const std::int64_t ctx_sum = static_cast<std::int64_t>(n_tokens) * start_pos +
                               static_cast<std::int64_t>(n_tokens) * (n_tokens + 1) / 2;
  return ctx_sum * per_token_pair;
}

// Work unit: one query token and a run of heads that share one K/V (a GQA group; for MLA all
// heads share the latent), so each cache row is loaded once for all of them. Runs are shortened
// only to give every thread work; a head's arithmetic is the same whatever run it is in.
struct Units {
  int group;           // heads sharing one K/V
  int heads_per_unit;  // <= group
  int per_group;       // units covering one group
  int per_token;       // units covering all heads of one token
  std::int64_t count;
};

Units PlanUnits(int n_tokens, int n_heads, int group, int min_units) {
  Units u{group, group, 1, n_heads / group, 0};
  while (static_cast<std::int64_t>(n_tokens) * u.per_token < min_units && u.heads_per_unit > 1) {
    u.heads_per_unit = (u.heads_per_unit + 1) / 2;
    u.per_group = (group + u.heads_per_unit - 1) / u.heads_per_unit;
    u.per_token = n_heads / group * u.per_group;
  }
  u.count = static_cast<std::int64_t>(n_tokens) * u.per_token;
  return u;
}

// The cache rows of positions [0, ctx), walking the block table without a division per token.
void GatherRows(const PagedKvLayer& kv, int ctx, const float** rows) {
  for (int t = 0, b = 0; t < ctx; ++b) {
    const float* row = kv.layer_base + static_cast<std::int64_t>(kv.block_table[b]) * kv.block_stride;
    for (int slot = 0; slot < kv.block_size && t < ctx; ++slot, ++t, row += kv.token_stride) {
      rows[t] = row;
    }
  }
}

// Per-thread scratch of one unit: the cache row pointers and the scores.
struct UnitScratch {
  const float** rows;  // [ctx]
  float* scores;       // [heads][ctx]
};

// Runs body(token, first_head, n_heads_in_unit, ctx, scratch) over every unit of a causal chunk;
// the scratch belongs to the running thread.
template <typename Body>
void ForEachUnit(ThreadPool& pool, int n_tokens, int start_pos, int n_heads, int group,
                 std::int64_t macs_per_ctx_token, Body&& body) {
  const bool parallel = pool.size() > 1 &&
                        CausalWork(n_tokens, start_pos, macs_per_ctx_token) >= kParallelMacs;
  const Units u = PlanUnits(n_tokens, n_heads, group, parallel ? 2 * pool.size() : 1);
  const int tasks = parallel ? static_cast<int>(std::min<std::int64_t>(u.count, pool.size() * 8)) : 1;
  const int max_ctx = start_pos + n_tokens;
  const std::size_t floats_per_worker = static_cast<std::size_t>(u.heads_per_unit) * max_ctx;
  std::vector<float> floats(pool.size() * floats_per_worker);
  std::vector<const float*> rows(static_cast<std::size_t>(pool.size()) * max_ctx);
  pool.Run(tasks, [&](int task, int worker) {
    float* f = floats.data() + worker * floats_per_worker;
    const UnitScratch mine{rows.data() + static_cast<std::size_t>(worker) * max_ctx, f};
    for (std::int64_t i = u.count * task / tasks; i < u.count * (task + 1) / tasks; ++i) {
      const int token = static_cast<int>(i / u.per_token);
      const int in_token = static_cast<int>(i % u.per_token);
      const int group_first = in_token / u.per_group * group;
      const int h0 = group_first + in_token % u.per_group * u.heads_per_unit;
      const int nh = std::min(u.heads_per_unit, group_first + group - h0);
      body(token, h0, nh, start_pos + token + 1, mine);
    }
  });
}

// The softmax-weighted sum shared by both attention kinds, for nh heads whose raw scores are in
// scores[j * ctx + t]: out_j = sum_t softmax_j(t) * value(t), value(t) = value_row(t)[0, dim).
// out_j = sum_t softmax_j(t) * value(t) for the unit's nh heads, whose raw scores are in
// s.scores[j * ctx + t]; value(t) = s.rows[t] + value_offset.
void WeightedSum(const UnitScratch& s, int nh, int ctx, std::int64_t value_offset,
                 std::int64_t dim, float* out) {
  for (int j = 0; j < nh; ++j) {
    float* a = s.scores + static_cast<std::size_t>(j) * ctx;
    const float inv = 1.0f / ExpAndSum(a, ctx);
    for (int t = 0; t < ctx; ++t) a[t] *= inv;
    WeightedRows(a, s.rows, value_offset, ctx, dim, out + j * dim);
  }
}

}  // namespace

void GqaAttention(ThreadPool& pool, const GqaAttentionParams& p) {
  if (p.n_tokens <= 0 || p.n_heads <= 0) return;
  const int group = p.n_heads / p.n_kv_heads;
  const std::int64_t hd = p.head_dim;
  ForEachUnit(pool, p.n_tokens, p.start_pos, p.n_heads, group, 2LL * p.n_heads * hd,
              [&](int token, int h0, int nh, int ctx, const UnitScratch& s) {
                const std::int64_t head_off = static_cast<std::int64_t>(h0 / group) * hd;
                const std::int64_t first = static_cast<std::int64_t>(token) * p.n_heads + h0;
                const float* q = p.q + first * hd;
                GatherRows(p.kv, ctx, s.rows);
                for (int t = 0; t < ctx; ++t) {
                  const float* k = s.rows[t] + p.k_offset + head_off;
                  for (int j = 0; j < nh; ++j) {
                    s.scores[static_cast<std::size_t>(j) * ctx + t] = Dot(q + j * hd, k, hd) * p.scale;
                  }
                }
                WeightedSum(s, nh, ctx, p.v_offset + head_off, hd, p.out + first * hd);
              });
}

void MlaAttention(ThreadPool& pool, const MlaAttentionParams& p) {
  if (p.n_tokens <= 0 || p.n_heads <= 0) return;
  const std::int64_t rank = p.kv_lora_rank;
  ForEachUnit(pool, p.n_tokens, p.start_pos, p.n_heads, p.n_heads,
              p.n_heads * (2 * rank + p.rope_dim),
              [&](int token, int h0, int nh, int ctx, const UnitScratch& s) {
                const std::int64_t first = static_cast<std::int64_t>(token) * p.n_heads + h0;
                const float* ql = p.q_latent + first * rank;
                const float* qr = p.q_rope + first * p.rope_dim;
                GatherRows(p.kv, ctx, s.rows);
                for (int t = 0; t < ctx; ++t) {
                  const float* c = s.rows[t];
                  for (int j = 0; j < nh; ++j) {
                    s.scores[static_cast<std::size_t>(j) * ctx + t] =
                        (Dot(ql + j * rank, c, rank) + Dot(qr + j * p.rope_dim, c + rank, p.rope_dim)) *
                        p.scale;
                  }
                }
                WeightedSum(s, nh, ctx, 0, rank, p.out_latent + first * rank);
              });
}

}  // namespace tandem::kernels::cpu
