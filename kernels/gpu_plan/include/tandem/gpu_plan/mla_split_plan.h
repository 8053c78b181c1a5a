#pragma once
// The work split of absorbed MLA decode attention on a GPU, FlashMLA-style: each sequence's KV is
// cut into chunks, the chunks of the whole batch are dealt to a fixed number of CTAs (about one
// per SM) so that every SM streams about the same number of KV bytes, and a combine step merges
// each sequence's per-chunk partial results.
//
// Batch invariance: FlashMLA sizes its chunks from the batch's total work, so the same sequence is
// cut differently in different batches and its result changes in the last bits. Here a chunk is a
// fixed number of KV blocks, so where a sequence is cut depends on its own length only; CTAs then
// take contiguous runs of chunks, which changes only *which* CTA computes a chunk, never *how*;
// and CombineChunkPartials merges a sequence's chunks in chunk order, always. Together: a
// sequence's output is the same bits in any batch, at any position in it.

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::gpu_plan {

struct MlaSplitOptions {
  int block_size = 64;     // KV tokens per paged block
  int chunk_blocks = 8;    // KV blocks per chunk: the unit one CTA works on in one go
  int num_ctas = 132;      // CTAs launched: the SM count (132 on H100/H200, 148 on B200)
  // A chunk's cost in the balancing is its token count plus this, for the fixed work of a chunk
  // (loading the queries, writing and later combining its partial output).
  int chunk_overhead_tokens = 64;
};

// Tokens [kv_begin, kv_end) of sequence `seq`, the `index`-th chunk of that sequence.
struct MlaChunk {
  int seq = 0;
  int index = 0;
  int kv_begin = 0;
  int kv_end = 0;
  friend bool operator==(const MlaChunk&, const MlaChunk&) = default;
};

struct MlaSplitPlan {
  int chunk_tokens = 0;
  // In (sequence, index) order; a chunk's position here is where its partial output goes.
  std::vector<MlaChunk> chunks;
  // Sequence b's chunks are chunks[seq_chunk_begin[b] .. seq_chunk_begin[b + 1]).
  std::vector<int> seq_chunk_begin;
  // CTA c computes chunks[cta_chunk_begin[c] .. cta_chunk_begin[c + 1]) (possibly none).
  std::vector<int> cta_chunk_begin;

  int num_ctas() const { return static_cast<int>(cta_chunk_begin.size()) - 1; }
  std::span<const MlaChunk> ChunksOf(int seq) const {
    return std::span<const MlaChunk>(chunks).subspan(
        seq_chunk_begin[seq], seq_chunk_begin[seq + 1] - seq_chunk_begin[seq]);
  }
};

// kv_lens[b]: KV tokens of sequence b (>= 1: a decode step attends at least to itself).
absl::StatusOr<MlaSplitPlan> PlanMlaSplit(std::span<const int> kv_lens,
                                          const MlaSplitOptions& options);

// The combine step for one (sequence, head), the contract of the GPU combine kernel. Chunk i
// produced out_i = sum_t exp(s_t - m_i) v_t / l_i over its tokens and lse_i = m_i + log(l_i).
// Then lse = m + log(sum_i exp(lse_i - m)) with m = max_i lse_i, and
// out = sum_i exp(lse_i - lse) * out_i, summed in chunk order 0, 1, 2, ... (never a tree whose
// shape depends on the chunk count of other sequences). With one chunk, out = out_0 exactly.
// partials: [n_chunks][dim]; lses: [n_chunks]; out: [dim].
void CombineChunkPartials(std::span<const float> partials, std::span<const float> lses, int dim,
                          std::span<float> out);

}  // namespace tandem::gpu_plan
