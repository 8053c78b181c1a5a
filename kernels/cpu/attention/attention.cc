#include "attention/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "attention/attention_tiles.h"
#include "simd/isa.h"
#include "simd/simd_math.h"

TANDEM_KERNELS_ISA_BEGIN
namespace {

// Work unit: a run of consecutive query tokens of one sequence and a run of heads that share one
// K/V (a GQA group; for MLA all heads share the latent). The unit walks its cache rows block by
// block, each block serving all of the unit's tokens and heads while it is in L1: a unit of one
// token streamed its whole context from memory (a 2,048-token context of a 4-KV-head layer is
// 4 MiB, past L2) once per token. Runs are shortened only to give every thread work; a (token,
// head)'s arithmetic is the same whatever unit it is in.
struct Units {
  int group;            // heads sharing one K/V
  int heads_per_unit;   // <= group
  int per_group;        // head runs covering one group
  int per_token;        // head runs covering all heads of one token
  int tokens_per_unit;  // consecutive tokens of one sequence in a unit
};

// Tokens per unit at most, and the scores a unit may hold (floats per thread).
constexpr int kMaxTokensPerUnit = 8;
constexpr std::int64_t kUnitScoreFloats = std::int64_t{1} << 20;

struct Chunk {
  int n_tokens;
  int start_pos;
};

// threads: those the call may use (1: it stays on the calling thread).
Units PlanUnits(std::span<const Chunk> chunks, int n_heads, int group, int threads, int max_ctx) {
  std::int64_t tokens = 0;
  for (const Chunk& c : chunks) tokens += c.n_tokens;
  Units u{group, group, 1, n_heads / group, 1};
  // Few tokens (decode): heads split until every thread has two units.
  while (tokens * u.per_token < 2 * threads && u.heads_per_unit > 1) {
    u.heads_per_unit = (u.heads_per_unit + 1) / 2;
    u.per_group = (group + u.heads_per_unit - 1) / u.heads_per_unit;
    u.per_token = n_heads / group * u.per_group;
  }
  // Many tokens: as many per unit as leave every thread eight units (later tokens see more rows,
  // so units differ in work) and keep the scores in budget.
  const std::int64_t min_units = threads > 1 ? 8 * threads : 1;
  auto units_with = [&](int q) {
    std::int64_t n = 0;
    for (const Chunk& c : chunks) n += (c.n_tokens + q - 1) / q;
    return n * u.per_token;
  };
  for (int q = kMaxTokensPerUnit; q > 1; q /= 2) {
    if (units_with(q) >= min_units &&
        static_cast<std::int64_t>(q) * u.heads_per_unit * max_ctx <= kUnitScoreFloats) {
      u.tokens_per_unit = q;
      break;
    }
  }
  return u;
}

// The cache rows of positions [0, ctx), walking the block table without a division per token.
void GatherRows(const PagedKvLayer& kv, int ctx, const float** rows) {
  for (int t = 0, b = 0; t < ctx; ++b) {
    const float* row =
        kv.layer_base + static_cast<std::int64_t>(kv.block_table[b]) * kv.block_stride;
    for (int slot = 0; slot < kv.block_size && t < ctx; ++slot, ++t, row += kv.token_stride) {
      rows[t] = row;
    }
  }
}

// Per-thread scratch of one unit: the cache row pointers and the scores.
struct UnitScratch {
  const float** rows;  // [ctx]
  float* scores;       // [tokens][heads][ctx of the unit's last token]
};

// One unit as its body sees it: tokens [token0, token0 + n_tokens) of chunk c, heads [h0, h0 +
// nh); token i's context is positions [0, first_ctx + i).
struct Unit {
  std::size_t c;
  int token0, n_tokens, h0, nh, first_ctx;
  int Ctx(int i) const { return first_ctx + i; }
  int LastCtx() const { return first_ctx + n_tokens - 1; }
  // Row (token i, head j) of the scores, LastCtx() floats apart.
  float* Scores(const UnitScratch& s, int i, int j) const {
    return s.scores + (static_cast<std::size_t>(i) * nh + j) * LastCtx();
  }
};

// Cache rows per block: a block's rows (the floats a pass reads from each) stay in L1 while
// every token of the unit reads them.
int RowsPerBlock(std::int64_t floats_per_row) {
  const std::int64_t rows = (std::int64_t{32} << 10) / (floats_per_row * 4);
  return static_cast<int>(std::clamp<std::int64_t>(rows / kPosTile * kPosTile, 16, 256));
}

// Runs body(unit, scratch) over every unit of every chunk (all with n_heads heads in groups of
// `group`), spread over the pool as one job; the scratch belongs to the running thread.
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
  const Units u = PlanUnits(chunks, n_heads, group, parallel ? pool.size() : 1, max_ctx);
  const int q = u.tokens_per_unit;
  std::vector<std::int64_t> first_unit(chunks.size() + 1, 0);  // prefix sums over chunks
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    first_unit[c + 1] = first_unit[c] + (chunks[c].n_tokens + q - 1) / q * u.per_token;
  }
  const std::int64_t units = first_unit.back();
  const int tasks = parallel ? static_cast<int>(std::min<std::int64_t>(units, pool.size() * 8)) : 1;
  const std::size_t floats_per_worker = static_cast<std::size_t>(q) * u.heads_per_unit * max_ctx;
  std::vector<float> floats(pool.size() * floats_per_worker);
  std::vector<const float*> rows(static_cast<std::size_t>(pool.size()) * max_ctx);
  pool.Run(tasks, [&](int task, int worker) {
    const UnitScratch mine{rows.data() + static_cast<std::size_t>(worker) * max_ctx,
                           floats.data() + worker * floats_per_worker};
    const std::int64_t begin = units * task / tasks, end = units * (task + 1) / tasks;
    std::size_t c =
        std::upper_bound(first_unit.begin(), first_unit.end(), begin) - first_unit.begin() - 1;
    for (std::int64_t i = begin; i < end; ++i) {
      while (i >= first_unit[c + 1]) ++c;
      const std::int64_t local = i - first_unit[c];
      const int token0 = static_cast<int>(local / u.per_token) * q;
      const int in_token = static_cast<int>(local % u.per_token);
      const int group_first = in_token / u.per_group * group;
      const int h0 = group_first + in_token % u.per_group * u.heads_per_unit;
      const int nh = std::min(u.heads_per_unit, group_first + group - h0);
      const int n_tokens = std::min(q, chunks[c].n_tokens - token0);
      body(Unit{c, token0, n_tokens, h0, nh, chunks[c].start_pos + token0 + 1}, mine);
    }
  });
}

// f(i, t0, t1) for each block [t0, t1) of the cache rows token i of the unit sees, block after
// block, every token within a block: the block's rows serve all the unit's tokens from L1.
template <typename F>
void ForEachBlockAndToken(const Unit& u, int rows_per_block, F&& f) {
  for (int t0 = 0; t0 < u.LastCtx(); t0 += rows_per_block) {
    for (int i = 0; i < u.n_tokens; ++i) {
      const int t1 = std::min(t0 + rows_per_block, u.Ctx(i));
      if (t0 < t1) f(i, t0, t1);
    }
  }
}

// out(i) = sum_t softmax_(i,j)(t) * value(t) for every (token i, head j) of the unit, whose raw
// scores are in u.Scores; value(t) = s.rows[t] + value_offset. Each output sums its terms in t
// order whatever the blocks.
template <typename Out>
void UnitWeightedSums(const Unit& u, const UnitScratch& s, std::int64_t value_offset,
                      std::int64_t dim, int rows_per_block, Out&& out) {
  for (int i = 0; i < u.n_tokens; ++i) {
    for (int j = 0; j < u.nh; ++j) {
      float* a = u.Scores(s, i, j);
      const float inv = 1.0f / ExpAndSum(a, u.Ctx(i));
      for (int t = 0; t < u.Ctx(i); ++t) a[t] *= inv;
    }
  }
  ForEachBlockAndToken(u, rows_per_block, [&](int i, int t0, int t1) {
    WeightedRows(u.Scores(s, i, 0), u.LastCtx(), u.nh, s.rows, value_offset, t0, t1, t0 == 0, dim,
                 out(i));
  });
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

// Prefill chunks' keys transposed once per call, by groups of kLanes positions, for
// TransposedScoreRows: per chunk that uses them, [kv head][group][head_dim][kLanes], zero past
// the chunk's context. A chunk uses them when its queries are many enough to repay the copy
// (a few tokens against a long cached prefix are not) and head_dim is whole chunks; the scores
// have the same bits either way, so which chunks do is only a question of speed.
constexpr int kTransposedMinTokens = 4;
constexpr std::int64_t kTransposedMinQueries = 32;                     // tokens x heads per KV head
constexpr std::int64_t kTransposedMaxFloats = std::int64_t{16} << 20;  // 64 MiB per call

class TransposedKeys {
 public:
  TransposedKeys(ThreadPool& pool, std::span<const GqaAttentionParams> batch, int group)
      : offset_(batch.size(), -1),
        lease_(pool.scratch().Acquire(Plan(batch, group) * sizeof(float))) {
    struct Item {
      std::size_t c;
      std::int64_t groups;
    };
    std::vector<Item> items;
    std::int64_t total = 0;
    for (std::size_t c = 0; c < batch.size(); ++c) {
      if (offset_[c] < 0) continue;
      const std::int64_t groups = Groups(batch[c]);
      items.push_back({c, groups * batch[c].n_kv_heads});
      total += items.back().groups;
    }
    if (total == 0) return;
    float* const data = lease_.As<float>();
    // Item i covers (kv head, group) pairs [0, groups) of its chunk; tasks split the pairs.
    const int tasks = static_cast<int>(std::min<std::int64_t>(total, pool.size()));
    pool.Run(tasks, [&](int task, int) {
      std::int64_t begin = total * task / tasks, end = total * (task + 1) / tasks, seen = 0;
      for (const Item& item : items) {
        const std::int64_t lo = std::max(begin, seen) - seen,
                           hi = std::min(end, seen + item.groups) - seen;
        seen += item.groups;
        const GqaAttentionParams& p = batch[item.c];
        const std::int64_t groups = Groups(p), hd = p.head_dim;
        const int ctx = p.start_pos + p.n_tokens;
        for (std::int64_t pair = lo; pair < hi; ++pair) {
          const std::int64_t head = pair / groups, g = pair % groups;
          float* out = data + offset_[item.c] + pair * hd * kLanes;
          for (int lane = 0; lane < kLanes; ++lane) {
            const std::int64_t t = g * kLanes + lane;
            if (t >= ctx) {
              for (std::int64_t d = 0; d < hd; ++d) out[d * kLanes + lane] = 0.0f;
              continue;
            }
            const float* key = p.kv.TokenRow(t) + p.k_offset + head * hd;
            for (std::int64_t d = 0; d < hd; ++d) out[d * kLanes + lane] = key[d];
          }
        }
      }
    });
  }

  // Chunk c's transposed keys of KV head h, or null where the chunk's scores go by DotTile.
  const float* For(std::size_t c, const GqaAttentionParams& p, int h) const {
    if (offset_[c] < 0) return nullptr;
    return lease_.As<float>() + offset_[c] + h * Groups(p) * p.head_dim * kLanes;
  }

 private:
  static std::int64_t Groups(const GqaAttentionParams& p) {
    return (p.start_pos + p.n_tokens + kLanes - 1) / kLanes;
  }
  // Picks the chunks (offset_) and returns the floats they need.
  std::int64_t Plan(std::span<const GqaAttentionParams> batch, int group) {
    std::int64_t floats = 0;
    for (std::size_t c = 0; c < batch.size(); ++c) {
      const GqaAttentionParams& p = batch[c];
      const std::int64_t need = Groups(p) * kLanes * p.head_dim * p.n_kv_heads;
      if (p.head_dim % kLanes != 0 || p.n_tokens < kTransposedMinTokens ||
          static_cast<std::int64_t>(p.n_tokens) * group < kTransposedMinQueries ||
          floats + need > kTransposedMaxFloats) {
        continue;
      }
      offset_[c] = floats;
      floats += need;
    }
    return floats;
  }

  std::vector<std::int64_t> offset_;  // floats into the lease, or -1
  ScratchPool::Lease lease_;
};

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
  const int rows_per_block = RowsPerBlock(hd);
  const TransposedKeys keys(pool, batch, group);
  ForEachUnit(
      pool, chunks, n_heads, group, 2LL * n_heads * hd, [&](const Unit& u, const UnitScratch& s) {
        const GqaAttentionParams& p = batch[u.c];
        const std::int64_t head_off = static_cast<std::int64_t>(u.h0 / group) * hd;
        auto first_of = [&](int i) {
          return static_cast<std::int64_t>(u.token0 + i) * n_heads + u.h0;
        };
        GatherRows(p.kv, u.LastCtx(), s.rows);
        if (const float* kt = keys.For(u.c, p, u.h0 / group)) {
          ForEachBlockAndToken(u, rows_per_block / kLanes * kLanes, [&](int i, int t0, int t1) {
            TransposedScoreRows(p.q + first_of(i) * hd, hd, u.nh, kt, t0, t1, hd, p.scale,
                                [&](int j) { return u.Scores(s, i, j); });
          });
          UnitWeightedSums(u, s, p.v_offset + head_off, hd, rows_per_block,
                           [&](int i) { return p.out + first_of(i) * hd; });
          return;
        }
        const std::int64_t k_off = p.k_offset + head_off;
        ForEachBlockAndToken(u, rows_per_block, [&](int i, int t0, int t1) {
          ForEachDot(
              p.q + first_of(i) * hd, hd, u.nh, t0, t1, hd,
              [&](int t) { return s.rows[t] + k_off; },
              [&](int j, int t, float dot) { u.Scores(s, i, j)[t] = dot * p.scale; });
        });
        UnitWeightedSums(u, s, p.v_offset + head_off, hd, rows_per_block,
                         [&](int i) { return p.out + first_of(i) * hd; });
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
  const int rows_per_block = RowsPerBlock(rank + rope);
  ForEachUnit(pool, chunks, n_heads, n_heads, n_heads * (2 * rank + rope),
              [&](const Unit& u, const UnitScratch& s) {
                const MlaAttentionParams& p = batch[u.c];
                auto first_of = [&](int i) {
                  return static_cast<std::int64_t>(u.token0 + i) * n_heads + u.h0;
                };
                GatherRows(p.kv, u.LastCtx(), s.rows);
                ForEachBlockAndToken(u, rows_per_block, [&](int i, int t0, int t1) {
                  // score = (latent dot + rope dot) * scale: the latent part lands first.
                  ForEachDot(
                      p.q_latent + first_of(i) * rank, rank, u.nh, t0, t1, rank,
                      [&](int t) { return s.rows[t]; },
                      [&](int j, int t, float dot) { u.Scores(s, i, j)[t] = dot; });
                  ForEachDot(
                      p.q_rope + first_of(i) * rope, rope, u.nh, t0, t1, rope,
                      [&](int t) { return s.rows[t] + rank; },
                      [&](int j, int t, float dot) {
                        float& score = u.Scores(s, i, j)[t];
                        score = (score + dot) * p.scale;
                      });
                });
                UnitWeightedSums(u, s, 0, rank, rows_per_block,
                                 [&](int i) { return p.out_latent + first_of(i) * rank; });
              });
}

TANDEM_KERNELS_ISA_END
