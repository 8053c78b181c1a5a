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

// Runs body(pair, ctx, scores) for every (token, head) pair of a causal chunk; scores has room
// for ctx floats and belongs to the running thread.
template <typename Body>
void ForEachPair(ThreadPool& pool, int n_tokens, int start_pos, int n_heads,
                 std::int64_t macs_per_ctx_token, Body&& body) {
  const int max_ctx = start_pos + n_tokens;
  const std::int64_t pairs = static_cast<std::int64_t>(n_tokens) * n_heads;
  const bool parallel = pool.size() > 1 &&
                        CausalWork(n_tokens, start_pos, macs_per_ctx_token) >= kParallelMacs;
  const int tasks =
      parallel ? static_cast<int>(std::min<std::int64_t>(pairs, pool.size() * 8)) : 1;
  std::vector<float> scratch(static_cast<std::size_t>(pool.size()) * max_ctx);
  pool.Run(tasks, [&](int task, int worker) {
    float* scores = scratch.data() + static_cast<std::size_t>(worker) * max_ctx;
    for (std::int64_t pair = pairs * task / tasks; pair < pairs * (task + 1) / tasks; ++pair) {
      body(pair, start_pos + static_cast<int>(pair / n_heads) + 1, scores);
    }
  });
}

}  // namespace

void GqaAttention(ThreadPool& pool, const GqaAttentionParams& p) {
  if (p.n_tokens <= 0 || p.n_heads <= 0) return;
  const int group = p.n_heads / p.n_kv_heads;
  ForEachPair(pool, p.n_tokens, p.start_pos, p.n_heads, 2LL * p.n_heads * p.head_dim,
              [&](std::int64_t pair, int ctx, float* scores) {
                const std::int64_t head_off =
                    static_cast<std::int64_t>(pair % p.n_heads / group) * p.head_dim;
                const float* q = p.q + pair * p.head_dim;
                for (int t = 0; t < ctx; ++t) {
                  scores[t] = Dot(q, p.kv.TokenRow(t) + p.k_offset + head_off, p.head_dim) * p.scale;
                }
                const float sum = ExpAndSum(scores, ctx);
                float* o = p.out + pair * p.head_dim;
                std::fill(o, o + p.head_dim, 0.0f);
                for (int t = 0; t < ctx; ++t) {
                  AddScaled(scores[t] / sum, p.kv.TokenRow(t) + p.v_offset + head_off, p.head_dim, o);
                }
              });
}

void MlaAttention(ThreadPool& pool, const MlaAttentionParams& p) {
  if (p.n_tokens <= 0 || p.n_heads <= 0) return;
  const std::int64_t rank = p.kv_lora_rank;
  ForEachPair(pool, p.n_tokens, p.start_pos, p.n_heads, p.n_heads * (2 * rank + p.rope_dim),
              [&](std::int64_t pair, int ctx, float* scores) {
                const float* ql = p.q_latent + pair * rank;
                const float* qr = p.q_rope + pair * p.rope_dim;
                for (int t = 0; t < ctx; ++t) {
                  const float* c = p.kv.TokenRow(t);
                  scores[t] = (Dot(ql, c, rank) + Dot(qr, c + rank, p.rope_dim)) * p.scale;
                }
                const float sum = ExpAndSum(scores, ctx);
                float* o = p.out_latent + pair * rank;
                std::fill(o, o + rank, 0.0f);
                for (int t = 0; t < ctx; ++t) AddScaled(scores[t] / sum, p.kv.TokenRow(t), rank, o);
              });
}

}  // namespace tandem::kernels::cpu
