#include "attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "attention_tiles.h"
#include "isa.h"
#include "simd_math.h"

TANDEM_KERNELS_ISA_BEGIN
namespace {

// Work unit: one query token and a run of heads that share one K/V (a GQA group; for MLA all
// heads share the latent), so each cache row is loaded once for all of them. Runs are shortened
// only to give every thread work; a head's arithmetic is the same whatever run it is in.
struct Units {
  int group;           // heads sharing one K/V
  int heads_per_unit;  // <= group
  int per_group;       // units covering one group
  int per_token;       // units covering all heads of one token
};

Units PlanUnits(std::int64_t n_tokens, int n_heads, int group, int min_units) {
  Units u{group, group, 1, n_heads / group};
  while (n_tokens * u.per_token < min_units && u.heads_per_unit > 1) {
    u.heads_per_unit = (u.heads_per_unit + 1) / 2;
    u.per_group = (group + u.heads_per_unit - 1) / u.heads_per_unit;
    u.per_token = n_heads / group * u.per_group;
  }
  return u;
}

// One sequence's chunk of queries, as ForEachUnit sees it.
struct Chunk {
  int n_tokens;
  int start_pos;
};

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

// Runs body(chunk, token, first_head, n_heads_in_unit, ctx, scratch) over every unit of every
// chunk (all with n_heads heads in groups of `group`), spread over the pool as one job; the
// scratch belongs to the running thread.
template <typename Body>
void ForEachUnit(ThreadPool& pool, std::span<const Chunk> chunks, int n_heads, int group,
                 std::int64_t macs_per_ctx_token, Body&& body) {
  std::int64_t work = 0, tokens = 0;
  int max_ctx = 0;
  for (const Chunk& c : chunks) {
    work += CausalWork(c.n_tokens, c.start_pos, macs_per_ctx_token);
    tokens += c.n_tokens;
    max_ctx = std::max(max_ctx, c.start_pos + c.n_tokens);
  }
  if (tokens == 0) return;
  const bool parallel = pool.size() > 1 && work >= kAttentionParallelMacs;
  const Units u = PlanUnits(tokens, n_heads, group, parallel ? 2 * pool.size() : 1);
  const std::int64_t units = tokens * u.per_token;
  const int tasks = parallel ? static_cast<int>(std::min<std::int64_t>(units, pool.size() * 8)) : 1;
  std::vector<std::int64_t> first_unit(chunks.size() + 1, 0);  // prefix sums over chunks
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    first_unit[c + 1] = first_unit[c] + static_cast<std::int64_t>(chunks[c].n_tokens) * u.per_token;
  }
  const std::size_t floats_per_worker = static_cast<std::size_t>(u.heads_per_unit) * max_ctx;
  std::vector<float> floats(pool.size() * floats_per_worker);
  std::vector<const float*> rows(static_cast<std::size_t>(pool.size()) * max_ctx);
  pool.Run(tasks, [&](int task, int worker) {
    const UnitScratch mine{rows.data() + static_cast<std::size_t>(worker) * max_ctx,
                           floats.data() + worker * floats_per_worker};
    const std::int64_t begin = units * task / tasks, end = units * (task + 1) / tasks;
    std::size_t c = std::upper_bound(first_unit.begin(), first_unit.end(), begin) - first_unit.begin() - 1;
    for (std::int64_t i = begin; i < end; ++i) {
      while (i >= first_unit[c + 1]) ++c;
      const std::int64_t local = i - first_unit[c];
      const int token = static_cast<int>(local / u.per_token);
      const int in_token = static_cast<int>(local % u.per_token);
      const int group_first = in_token / u.per_group * group;
      const int h0 = group_first + in_token % u.per_group * u.heads_per_unit;
      const int nh = std::min(u.heads_per_unit, group_first + group - h0);
      body(c, token, h0, nh, chunks[c].start_pos + token + 1, mine);
    }
  });
}

// out_j = sum_t softmax_j(t) * value(t) for the unit's nh heads, whose raw scores are in
// s.scores[j * ctx + t]; value(t) = s.rows[t] + value_offset.
void WeightedSum(const UnitScratch& s, int nh, int ctx, std::int64_t value_offset,
                 std::int64_t dim, float* out) {
  for (int j = 0; j < nh; ++j) {
    float* a = s.scores + static_cast<std::size_t>(j) * ctx;
    const float inv = 1.0f / ExpAndSum(a, ctx);
    for (int t = 0; t < ctx; ++t) a[t] *= inv;
  }
  WeightedRows(s.scores, nh, s.rows, value_offset, ctx, dim, out);
}

// Batches whose sequences share the head layout run as one job; any other batch runs per sequence
// (GQA: SameHeadLayout in attention.h).
template <typename Params>
bool SameHeads(std::span<const Params> batch, bool (*same)(const Params&, const Params&)) {
  for (const Params& p : batch) {
    if (!same(p, batch[0])) return false;
  }
  return true;
}

std::vector<Chunk> ChunksOf(auto batch) {
  std::vector<Chunk> chunks;
  chunks.reserve(batch.size());
  for (const auto& p : batch) chunks.push_back({std::max(p.n_tokens, 0), p.start_pos});
  return chunks;
}

}  // namespace

void GqaAttention(ThreadPool& pool, std::span<const GqaAttentionParams> batch) {
  if (batch.empty() || batch[0].n_heads <= 0) return;
  if (!SameHeadLayout(batch)) {
    for (const GqaAttentionParams& p : batch) GqaAttention(pool, std::span(&p, 1));
    return;
  }
  const int n_heads = batch[0].n_heads;
  const int group = n_heads / batch[0].n_kv_heads;
  const std::int64_t hd = batch[0].head_dim;
  const std::vector<Chunk> chunks = ChunksOf(batch);
  ForEachUnit(pool, chunks, n_heads, group, 2LL * n_heads * hd,
              [&](std::size_t c, int token, int h0, int nh, int ctx, const UnitScratch& s) {
                const GqaAttentionParams& p = batch[c];
                const std::int64_t head_off = static_cast<std::int64_t>(h0 / group) * hd;
                const std::int64_t first = static_cast<std::int64_t>(token) * n_heads + h0;
                const float* q = p.q + first * hd;
                GatherRows(p.kv, ctx, s.rows);
                const std::int64_t k_off = p.k_offset + head_off;
                ForEachDot(q, hd, nh, ctx, hd, [&](int t) { return s.rows[t] + k_off; },
                           [&](int j, int t, float dot) {
                             s.scores[static_cast<std::size_t>(j) * ctx + t] = dot * p.scale;
                           });
                WeightedSum(s, nh, ctx, p.v_offset + head_off, hd, p.out + first * hd);
              });
}

void MlaAttention(ThreadPool& pool, std::span<const MlaAttentionParams> batch) {
  if (batch.empty() || batch[0].n_heads <= 0) return;
  const bool uniform = SameHeads<MlaAttentionParams>(batch, [](const auto& a, const auto& b) {
    return a.n_heads == b.n_heads && a.kv_lora_rank == b.kv_lora_rank && a.rope_dim == b.rope_dim;
  });
  if (!uniform) {
    for (const MlaAttentionParams& p : batch) MlaAttention(pool, std::span(&p, 1));
    return;
  }
  const int n_heads = batch[0].n_heads;
  const std::int64_t rank = batch[0].kv_lora_rank;
  const int rope = batch[0].rope_dim;
  const std::vector<Chunk> chunks = ChunksOf(batch);
  ForEachUnit(pool, chunks, n_heads, n_heads, n_heads * (2 * rank + rope),
              [&](std::size_t c, int token, int h0, int nh, int ctx, const UnitScratch& s) {
                const MlaAttentionParams& p = batch[c];
                const std::int64_t first = static_cast<std::int64_t>(token) * n_heads + h0;
                const float* ql = p.q_latent + first * rank;
                const float* qr = p.q_rope + first * rope;
                GatherRows(p.kv, ctx, s.rows);
                // score = (latent dot + rope dot) * scale: the latent part lands first.
                ForEachDot(ql, rank, nh, ctx, rank, [&](int t) { return s.rows[t]; },
                           [&](int j, int t, float dot) {
                             s.scores[static_cast<std::size_t>(j) * ctx + t] = dot;
                           });
                ForEachDot(qr, rope, nh, ctx, rope, [&](int t) { return s.rows[t] + rank; },
                           [&](int j, int t, float dot) {
                             float& score = s.scores[static_cast<std::size_t>(j) * ctx + t];
                             score = (score + dot) * p.scale;
                           });
                WeightedSum(s, nh, ctx, 0, rank, p.out_latent + first * rank);
              });
}

TANDEM_KERNELS_ISA_END
