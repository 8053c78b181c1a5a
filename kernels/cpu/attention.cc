#include "attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "simd.h"

namespace tandem::kernels::cpu {
namespace {

// Below this many multiply-adds (scores plus weighted sum) a call stays on the calling thread.
constexpr std::int64_t kParallelMacs = 1 << 16;

// Turns scores[0, n) into exp(score - max) in place and returns their sum.
float ExpAndSum(float* scores, int n) {
  float mx = -INFINITY;
  for (int t = 0; t < n; ++t) mx = std::max(mx, scores[t]);
  float sum = 0.0f;
  for (int t = 0; t < n; ++t) {
    scores[t] = std::exp(scores[t] - mx);
    sum += scores[t];
  }
  return sum;
}

// o[0, n) += a * v[0, n)
inline void AddScaled(float a, const float* v, std::int64_t n, float* o) {
  const F32x16 av = Splat(a);
  std::int64_t d = 0;
  for (; d + kLanes <= n; d += kLanes) Store(o + d, Fma(av, Load(v + d), Load(o + d)));
  for (; d < n; ++d) o[d] += a * v[d];
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

// Runs body(token, first_head, n_heads_in_unit, ctx, scratch) over every unit of a causal chunk.
// scratch holds n_heads_in_unit * (ctx + 1) floats and belongs to the running thread.
template <typename Body>
void ForEachUnit(ThreadPool& pool, int n_tokens, int start_pos, int n_heads, int group,
                 std::int64_t macs_per_ctx_token, Body&& body) {
  const bool parallel = pool.size() > 1 &&
                        CausalWork(n_tokens, start_pos, macs_per_ctx_token) >= kParallelMacs;
  const Units u = PlanUnits(n_tokens, n_heads, group, parallel ? 2 * pool.size() : 1);
  const int tasks = parallel ? static_cast<int>(std::min<std::int64_t>(u.count, pool.size() * 8)) : 1;
  const std::size_t per_worker =
      static_cast<std::size_t>(u.heads_per_unit) * (start_pos + n_tokens + 1);
  std::vector<float> scratch(pool.size() * per_worker);
  pool.Run(tasks, [&](int task, int worker) {
    float* mine = scratch.data() + worker * per_worker;
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
template <typename ValueRow>
void WeightedSum(float* scores, float* sums, int nh, int ctx, std::int64_t dim, float* out,
                 ValueRow&& value_row) {
  for (int j = 0; j < nh; ++j) sums[j] = ExpAndSum(scores + static_cast<std::size_t>(j) * ctx, ctx);
  std::fill(out, out + nh * dim, 0.0f);
  for (int t = 0; t < ctx; ++t) {
    const float* v = value_row(t);
    for (int j = 0; j < nh; ++j) {
      AddScaled(scores[static_cast<std::size_t>(j) * ctx + t] / sums[j], v, dim, out + j * dim);
    }
  }
}

}  // namespace

void GqaAttention(ThreadPool& pool, const GqaAttentionParams& p) {
  if (p.n_tokens <= 0 || p.n_heads <= 0) return;
  const int group = p.n_heads / p.n_kv_heads;
  const std::int64_t hd = p.head_dim;
  ForEachUnit(pool, p.n_tokens, p.start_pos, p.n_heads, group, 2LL * p.n_heads * hd,
              [&](int token, int h0, int nh, int ctx, float* scratch) {
                const std::int64_t head_off = static_cast<std::int64_t>(h0 / group) * hd;
                const std::int64_t first = static_cast<std::int64_t>(token) * p.n_heads + h0;
                const float* q = p.q + first * hd;
                float* scores = scratch;
                for (int t = 0; t < ctx; ++t) {
                  const float* k = p.kv.TokenRow(t) + p.k_offset + head_off;
                  for (int j = 0; j < nh; ++j) {
                    scores[static_cast<std::size_t>(j) * ctx + t] = Dot(q + j * hd, k, hd) * p.scale;
                  }
                }
                WeightedSum(scores, scratch + static_cast<std::size_t>(nh) * ctx, nh, ctx, hd,
                            p.out + first * hd,
                            [&](int t) { return p.kv.TokenRow(t) + p.v_offset + head_off; });
              });
}

void MlaAttention(ThreadPool& pool, const MlaAttentionParams& p) {
  if (p.n_tokens <= 0 || p.n_heads <= 0) return;
  const std::int64_t rank = p.kv_lora_rank;
  ForEachUnit(pool, p.n_tokens, p.start_pos, p.n_heads, p.n_heads,
              p.n_heads * (2 * rank + p.rope_dim),
              [&](int token, int h0, int nh, int ctx, float* scratch) {
                const std::int64_t first = static_cast<std::int64_t>(token) * p.n_heads + h0;
                const float* ql = p.q_latent + first * rank;
                const float* qr = p.q_rope + first * p.rope_dim;
                float* scores = scratch;
                for (int t = 0; t < ctx; ++t) {
                  const float* c = p.kv.TokenRow(t);
                  for (int j = 0; j < nh; ++j) {
                    scores[static_cast<std::size_t>(j) * ctx + t] =
                        (Dot(ql + j * rank, c, rank) + Dot(qr + j * p.rope_dim, c + rank, p.rope_dim)) *
                        p.scale;
                  }
                }
                WeightedSum(scores, scratch + static_cast<std::size_t>(nh) * ctx, nh, ctx, rank,
                            p.out_latent + first * rank, [&](int t) { return p.kv.TokenRow(t); });
              });
}

}  // namespace tandem::kernels::cpu
