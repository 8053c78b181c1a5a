#include "amx/amx_attention.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "amx/amx_tiles.h"
#include "attention/attention.h"
#include "simd/simd_math.h"

#if defined(TANDEM_SIMD_AVX512)
TANDEM_KERNELS_ISA_BEGIN
namespace {

constexpr int kRows = 16;         // (token, head) rows per tile
constexpr int kKeys = 16;         // positions per score tile (C tile columns)
constexpr int kPairs = 32;        // positions per weighted-sum chunk (tile row of bf16 pairs)
constexpr int kDims = 32;         // head dims per score chunk
constexpr int kDimTile = 16;      // head dims per weighted-sum tile (C tile columns)
constexpr int kTileElems = 512;   // bf16 elements in one 1 KiB tile
constexpr int kAccumulators = 4;  // C tiles in flight (tiles 0-3; 4-7 hold the operands)

// Tasks per thread: units differ in cost (causal: later rows see more positions).
constexpr int kTasksPerThread = 4;

struct Shape {
  int n_heads, group, hd;
  int dim_chunks;  // ceil(hd / 32): score tiles per (rows, positions) pair
  int dim_tiles;   // ceil(hd / 16): weighted-sum tiles
};

// One task's share: rows [row0, row1) (row = token * group + head in group) of KV head `kv_head`
// of sequence `seq`.
struct Unit {
  int seq, kv_head, row0, row1;
};

// Per-thread buffers, sized for the batch's longest context.
struct Scratch {
  std::uint16_t* keys;     // [ctx / 16][dim_chunks] tiles: [16 dim pairs][16 positions][2]
  std::uint16_t* values;   // [ctx / 32][dim_tiles] tiles: [16 position pairs][16 dims][2]
  std::uint16_t* queries;  // [dim_chunks] tiles: [16 rows][32 dims]
  float* scores;           // [16 rows][ctx_cap]
  std::uint16_t* probs;    // [16 rows][ctx_cap], bf16
  float* out;              // [kAccumulators][16 rows][16 dims]
};

// Positions [0, ctx) of one KV head as the second operand of the score tiles and of the weighted
// sum tiles; positions up to the padded end are zeros.
TANDEM_AMX_TARGET void PackCache(const GqaAttentionParams& p, const Shape& s, int kv_head, int ctx,
                                 const Scratch& w) {
  const int key_tiles = (ctx + kKeys - 1) / kKeys;
  const int value_chunks = (ctx + kPairs - 1) / kPairs;
  std::memset(w.keys, 0, sizeof(std::uint16_t) * key_tiles * s.dim_chunks * kTileElems);
  std::memset(w.values, 0, sizeof(std::uint16_t) * value_chunks * s.dim_tiles * kTileElems);
  const std::int64_t head = static_cast<std::int64_t>(kv_head) * s.hd;
  // A tile row of key dims (2i, 2i + 1) holds 16 positions' pairs: dword i of the packed 32 dims
  // goes to row i, column t % 16.
  const __m512i rows_apart =
      _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                         _mm512_set1_epi32(kKeys));
  for (int t = 0; t < ctx; ++t) {
    const float* k = p.kv.TokenRow(t) + p.k_offset + head;
    for (int c = 0; c < s.dim_chunks; ++c) {
      std::uint16_t* tile =
          w.keys + (static_cast<std::int64_t>(t / kKeys) * s.dim_chunks + c) * kTileElems;
      const __m512i v = Bf16x32(k + c * kDims, std::min(kDims, s.hd - c * kDims));
      _mm512_i32scatter_epi32(reinterpret_cast<int*>(tile) + t % kKeys, rows_apart, v, 4);
    }
  }
  // A tile row of values holds positions (2i, 2i + 1) for 16 dims, interleaved.
  const __m512i interleave =
      _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                       21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int t = 0; t < ctx; t += 2) {
    const float* v0 = p.kv.TokenRow(t) + p.v_offset + head;
    const float* v1 = t + 1 < ctx ? p.kv.TokenRow(t + 1) + p.v_offset + head : nullptr;
    for (int d = 0; d < s.dim_tiles; ++d) {
      const int n = std::min(kDimTile, s.hd - d * kDimTile);
      const __mmask16 m = FirstLanes(n);
      const __m512 a = _mm512_maskz_loadu_ps(m, v0 + d * kDimTile);
      const __m512 b =
          v1 != nullptr ? _mm512_maskz_loadu_ps(m, v1 + d * kDimTile) : _mm512_setzero_ps();
      const __m512bh both = _mm512_cvtne2ps_pbh(b, a);  // a's 16 then b's 16
      std::uint16_t* tile =
          w.values + (static_cast<std::int64_t>(t / kPairs) * s.dim_tiles + d) * kTileElems;
      _mm512_storeu_si512(
          tile + (t % kPairs) / 2 * 32,
          _mm512_permutexvar_epi16(interleave, reinterpret_cast<const __m512i&>(both)));
    }
  }
}

// a[0, n) *= scale.
TANDEM_AMX_TARGET inline void Scale(float* a, int n, float scale) {
  const __m512 by = _mm512_set1_ps(scale);
  for (int t = 0; t < n; t += 16) {
    const __mmask16 m = FirstLanes(n - t);
    _mm512_mask_storeu_ps(a + t, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, a + t), by));
  }
}

// The scores of kRows rows against key tiles [0, key_tiles) with VDPBF16PS on the AMX operands
// as packed: row i's score for position n is one float32 accumulator onto which the instruction
// adds (query pair k, key pair k of n) for the 16 pairs of each 32-dim chunk, chunks in order.
TANDEM_AMX_TARGET void DpScores(const Shape& s, int key_tiles, int ctx_cap, const Scratch& w) {
  const auto* queries = reinterpret_cast<const std::uint32_t*>(w.queries);
  for (int j = 0; j < key_tiles; ++j) {
    const std::uint16_t* keys = w.keys + static_cast<std::int64_t>(j) * s.dim_chunks * kTileElems;
    __m512 acc[kRows];
#pragma GCC unroll 16
    for (int i = 0; i < kRows; ++i) acc[i] = _mm512_setzero_ps();
    for (int c = 0; c < s.dim_chunks; ++c) {
      for (int k = 0; k < kDims / 2; ++k) {
        const __m512bh key = (__m512bh)_mm512_loadu_si512(keys + c * kTileElems + k * 32);
        const std::uint32_t* q = queries + c * (kTileElems / 2) + k;
#pragma GCC unroll 16
        for (int i = 0; i < kRows; ++i) {
          acc[i] = _mm512_dpbf16_ps(
              acc[i], (__m512bh)_mm512_set1_epi32(static_cast<int>(q[i * kDims / 2])), key);
        }
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < kRows; ++i) {
      _mm512_storeu_ps(w.scores + static_cast<std::int64_t>(i) * ctx_cap + j * kKeys, acc[i]);
    }
  }
}

// The weighted sums of rows [0, rows) over positions [0, last_ctx) with VDPBF16PS: dim d of row
// i is one float32 accumulator onto which the instruction adds (weight pair, value pair) for the
// position pairs in order from 0 (positions past a row's own weigh exactly 0).
TANDEM_AMX_TARGET void DpWeightedSums(const GqaAttentionParams& p, const Shape& s, int rows,
                                      int last_ctx, int ctx_cap, const Scratch& w,
                                      const std::int64_t* q_rows) {
  const auto* probs = reinterpret_cast<const std::uint32_t*>(w.probs);
  const int chunks = (last_ctx + kPairs - 1) / kPairs;
  for (int d = 0; d < s.dim_tiles; ++d) {
    __m512 acc[kRows];
#pragma GCC unroll 16
    for (int i = 0; i < kRows; ++i) acc[i] = _mm512_setzero_ps();
    for (int c = 0; c < chunks; ++c) {
      const std::uint16_t* values =
          w.values + (static_cast<std::int64_t>(c) * s.dim_tiles + d) * kTileElems;
      for (int k = 0; k < kPairs / 2; ++k) {
        const __m512bh value = (__m512bh)_mm512_loadu_si512(values + k * 32);
        const std::uint32_t* prob = probs + c * (kPairs / 2) + k;
#pragma GCC unroll 16
        for (int i = 0; i < kRows; ++i) {
          acc[i] = _mm512_dpbf16_ps(acc[i],
                                    (__m512bh)_mm512_set1_epi32(static_cast<int>(
                                        prob[static_cast<std::int64_t>(i) * (ctx_cap / 2)])),
                                    value);
        }
      }
    }
    const __mmask16 m = FirstLanes(s.hd - d * kDimTile);
    for (int i = 0; i < rows; ++i) {
      _mm512_mask_storeu_ps(p.out + q_rows[i] * s.hd + d * kDimTile, m, acc[i]);
    }
  }
}

// Rows [r0, r0 + 16) of a unit (those below `row_end` exist): scores, softmax, weighted sum, on
// AMX tiles (kAmx) or with VDPBF16PS on the same packed operands.
template <bool kAmx>
TANDEM_AMX_TARGET void RowTile(const GqaAttentionParams& p, const Shape& s, int kv_head, int r0,
                               int row_end, int ctx_cap, const Scratch& w) {
  const int rows = std::min(kRows, row_end - r0);
  const int last_ctx = p.start_pos + (r0 + rows - 1) / s.group + 1;
  auto q_row = [&](int i) {
    const int r = r0 + i;
    return static_cast<std::int64_t>(r / s.group) * s.n_heads + kv_head * s.group + r % s.group;
  };
  std::memset(w.queries, 0, sizeof(std::uint16_t) * s.dim_chunks * kTileElems);
  for (int i = 0; i < rows; ++i) {
    const float* q = p.q + q_row(i) * s.hd;
    for (int c = 0; c < s.dim_chunks; ++c) {
      _mm512_storeu_si512(w.queries + c * kTileElems + i * kDims,
                          Bf16x32(q + c * kDims, std::min(kDims, s.hd - c * kDims)));
    }
  }
  // Scores: up to four key tiles at once, each into its own accumulator (tiles 0-3). One chain of
  // products into a single accumulator waits on each product's latency; four overlap. Every
  // accumulator still sums its chunks in order, so the bits are those of one tile at a time.
  // (Macros: GCC's tile intrinsics take the tile's number as a literal.)
  const std::int64_t score_bytes = static_cast<std::int64_t>(ctx_cap) * sizeof(float);
  const int key_tiles = (last_ctx + kKeys - 1) / kKeys;
  if constexpr (!kAmx) DpScores(s, key_tiles, ctx_cap, w);
  for (int j0 = 0; kAmx && j0 < key_tiles; j0 += kAccumulators) {
    const int nj = std::min(kAccumulators, key_tiles - j0);
    const std::uint16_t* keys = w.keys + static_cast<std::int64_t>(j0) * s.dim_chunks * kTileElems;
    const std::int64_t key_step = static_cast<std::int64_t>(s.dim_chunks) * kTileElems;
#define TANDEM_FOR_ACCUMULATORS(n, op) \
  op(0, 6);                            \
  if ((n) > 1) {                       \
    op(1, 7);                          \
  }                                    \
  if ((n) > 2) {                       \
    op(2, 6);                          \
  }                                    \
  if ((n) > 3) {                       \
    op(3, 7);                          \
  }
#define TANDEM_ZERO(acc, unused) _tile_zero(acc)
    TANDEM_FOR_ACCUMULATORS(nj, TANDEM_ZERO);
    for (int c = 0; c < s.dim_chunks; ++c) {
      _tile_loadd(4, w.queries + c * kTileElems, 64);
#define TANDEM_SCORE(acc, key)                                  \
  _tile_loadd(key, keys + (acc)*key_step + c * kTileElems, 64); \
  _tile_dpbf16ps(acc, 4, key)
      TANDEM_FOR_ACCUMULATORS(nj, TANDEM_SCORE);
#undef TANDEM_SCORE
    }
#define TANDEM_STORE_SCORES(acc, unused) \
  _tile_stored(acc, w.scores + (j0 + (acc)) * kKeys, score_bytes)
    TANDEM_FOR_ACCUMULATORS(nj, TANDEM_STORE_SCORES);
#undef TANDEM_STORE_SCORES
  }
  const int padded = (last_ctx + kPairs - 1) / kPairs * kPairs;
  for (int i = 0; i < kRows; ++i) {
    std::uint16_t* prob = w.probs + static_cast<std::int64_t>(i) * ctx_cap;
    int ctx = 0;
    if (i < rows) {
      ctx = p.start_pos + (r0 + i) / s.group + 1;
      float* a = w.scores + static_cast<std::int64_t>(i) * ctx_cap;
      Scale(a, ctx, p.scale);
      const float inv = 1.0f / ExpAndSum(a, ctx);
      // Normalised and rounded in one pass: bf16(a * inv), as two passes would give.
      const __m512 by = _mm512_set1_ps(inv);
      for (int t = 0; t < ctx; t += kPairs) {
        _mm512_storeu_si512(prob + t, ScaledBf16x32(a + t, std::min(kPairs, ctx - t), by));
      }
    }
    // Past the row's own positions, weight exactly 0 up to the tile's padded end.
    const int from = (ctx + kPairs - 1) / kPairs * kPairs;
    std::memset(prob + from, 0, sizeof(std::uint16_t) * (padded - from));
  }
  // Weighted sums: up to four dim tiles at once against one load of the weights' tile.
  const std::int64_t prob_bytes = static_cast<std::int64_t>(ctx_cap) * sizeof(std::uint16_t);
  if constexpr (!kAmx) {
    std::int64_t q_rows[kRows];
    for (int i = 0; i < rows; ++i) q_rows[i] = q_row(i);
    DpWeightedSums(p, s, rows, last_ctx, ctx_cap, w, q_rows);
  }
  for (int d0 = 0; kAmx && d0 < s.dim_tiles; d0 += kAccumulators) {
    const int nd = std::min(kAccumulators, s.dim_tiles - d0);
    TANDEM_FOR_ACCUMULATORS(nd, TANDEM_ZERO);
    for (int c = 0; c * kPairs < last_ctx; ++c) {
      _tile_loadd(5, w.probs + c * kPairs, prob_bytes);
      const std::uint16_t* values =
          w.values + (static_cast<std::int64_t>(c) * s.dim_tiles + d0) * kTileElems;
#define TANDEM_WEIGH(acc, value)                     \
  _tile_loadd(value, values + (acc)*kTileElems, 64); \
  _tile_dpbf16ps(acc, 5, value)
      TANDEM_FOR_ACCUMULATORS(nd, TANDEM_WEIGH);
#undef TANDEM_WEIGH
    }
#define TANDEM_STORE_SUMS(acc, unused) \
  _tile_stored(acc, w.out + (acc)*kRows * kDimTile, kDimTile * sizeof(float))
    TANDEM_FOR_ACCUMULATORS(nd, TANDEM_STORE_SUMS);
#undef TANDEM_STORE_SUMS
    for (int t = 0; t < nd; ++t) {
      const int d = d0 + t;
      const int n = std::min(kDimTile, s.hd - d * kDimTile);
      for (int i = 0; i < rows; ++i) {
        std::memcpy(p.out + q_row(i) * s.hd + d * kDimTile, w.out + (t * kRows + i) * kDimTile,
                    sizeof(float) * n);
      }
    }
  }
#undef TANDEM_ZERO
#undef TANDEM_FOR_ACCUMULATORS
}

template <bool kAmx>
TANDEM_AMX_TARGET void RunUnit(std::span<const GqaAttentionParams> batch, const Shape& s,
                               const Unit& u, int ctx_cap, const Scratch& w) {
  const GqaAttentionParams& p = batch[u.seq];
  PackCache(p, s, u.kv_head, p.start_pos + (u.row1 - 1) / s.group + 1, w);
  for (int r0 = u.row0; r0 < u.row1; r0 += kRows) {
    RowTile<kAmx>(p, s, u.kv_head, r0, u.row1, ctx_cap, w);
  }
}

TANDEM_AMX_TARGET void RunUnits(std::span<const GqaAttentionParams> batch, const Shape& s,
                                std::span<const Unit> units, int ctx_cap, const Scratch& w,
                                bool amx) {
  if (!amx) {
    for (const Unit& u : units) RunUnit<false>(batch, s, u, ctx_cap, w);
    return;
  }
  LoadTileConfig();
  for (const Unit& u : units) RunUnit<true>(batch, s, u, ctx_cap, w);
  _tile_release();
}

void Bf16GqaAttention(ThreadPool& pool, std::span<const GqaAttentionParams> batch, bool amx) {
  if (batch.empty() || batch[0].n_heads <= 0) return;
  if (!SameHeadLayout(batch)) {
    for (const GqaAttentionParams& one : batch) Bf16GqaAttention(pool, std::span(&one, 1), amx);
    return;
  }
  const GqaAttentionParams& first = batch[0];
  const int group = first.n_heads / first.n_kv_heads;
  const Shape s{first.n_heads, group, first.head_dim, (first.head_dim + kDims - 1) / kDims,
                (first.head_dim + kDimTile - 1) / kDimTile};
  int ctx_cap = 0;
  std::int64_t macs = 0;
  for (const GqaAttentionParams& p : batch) {
    if (p.n_tokens <= 0) continue;
    ctx_cap = std::max(ctx_cap, p.start_pos + p.n_tokens);
    macs += CausalWork(p.n_tokens, p.start_pos, 2LL * p.n_heads * p.head_dim);
  }
  if (ctx_cap == 0) return;
  ctx_cap = (ctx_cap + kPairs - 1) / kPairs * kPairs;
  // Units: each KV head of each sequence, its rows split into parts of whole row tiles so that the
  // pool has a few units per thread. A unit packs the cache once for all its rows.
  const std::int64_t heads = static_cast<std::int64_t>(batch.size()) * first.n_kv_heads;
  const std::int64_t want = static_cast<std::int64_t>(pool.size()) * kTasksPerThread;
  std::vector<Unit> units;
  for (int seq = 0; seq < static_cast<int>(batch.size()); ++seq) {
    const int rows = std::max(batch[seq].n_tokens, 0) * group;
    if (rows == 0) continue;
    const int tiles = (rows + kRows - 1) / kRows;
    const int parts =
        static_cast<int>(std::clamp<std::int64_t>((want + heads - 1) / heads, 1, tiles));
    for (int kv = 0; kv < first.n_kv_heads; ++kv) {
      for (int part = 0; part < parts; ++part) {
        const int t0 = tiles * part / parts, t1 = tiles * (part + 1) / parts;
        units.push_back({seq, kv, t0 * kRows, std::min(rows, t1 * kRows)});
      }
    }
  }
  const std::size_t key_elems =
      static_cast<std::size_t>(ctx_cap / kKeys) * s.dim_chunks * kTileElems;
  const std::size_t value_elems =
      static_cast<std::size_t>(ctx_cap / kPairs) * s.dim_tiles * kTileElems;
  const std::size_t query_elems = static_cast<std::size_t>(s.dim_chunks) * kTileElems;
  const std::size_t row_elems = static_cast<std::size_t>(kRows) * ctx_cap;
  const std::size_t bf16_per_worker = key_elems + value_elems + query_elems + row_elems;
  const std::size_t floats_per_worker = row_elems + kAccumulators * kRows * kDimTile;
  // Uninitialised: each unit zeroes what it reads before writing it.
  std::unique_ptr<std::uint16_t[]> bf16(new std::uint16_t[bf16_per_worker * pool.size()]);
  std::unique_ptr<float[]> floats(new float[floats_per_worker * pool.size()]);
  const int tasks = static_cast<int>(
      std::min<std::int64_t>(static_cast<std::int64_t>(units.size()),
                             pool.size() > 1 && macs >= kAttentionParallelMacs ? want : 1));
  pool.Run(tasks, [&](int task, int worker) {
    std::uint16_t* b = bf16.get() + bf16_per_worker * worker;
    float* f = floats.get() + floats_per_worker * worker;
    const Scratch w{b,
                    b + key_elems,
                    b + key_elems + value_elems,
                    f,
                    b + key_elems + value_elems + query_elems,
                    f + row_elems};
    const std::size_t u0 = units.size() * task / tasks, u1 = units.size() * (task + 1) / tasks;
    RunUnits(batch, s, std::span(units).subspan(u0, u1 - u0), ctx_cap, w, amx);
  });
}

}  // namespace

void AmxGqaAttention(ThreadPool& pool, std::span<const GqaAttentionParams> batch) {
  Bf16GqaAttention(pool, batch, /*amx=*/true);
}

void Dpbf16GqaAttention(ThreadPool& pool, std::span<const GqaAttentionParams> batch) {
  Bf16GqaAttention(pool, batch, /*amx=*/false);
}

TANDEM_KERNELS_ISA_END
#endif  // TANDEM_SIMD_AVX512
