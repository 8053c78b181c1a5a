#pragma once

#include <cstdint>
#include <span>

#include "runtime/thread_pool.h"
#include "simd/isa.h"
#include "tandem/kernels/attention_params.h"

TANDEM_KERNELS_ISA_BEGIN

// Paged causal attention for a batch of sequences' query chunks, spread over the pool as one job
// of (run of query tokens, run of heads) units. Each (token, head)'s output depends only on its
// query, its position and its cache, computed in a fixed order: the same alone, in a chunk of any
// size, or in a batch of any sequences.
void GqaAttention(ThreadPool& pool, std::span<const GqaAttentionParams> batch);
void MlaAttention(ThreadPool& pool, std::span<const MlaAttentionParams> batch);

// What the attention kernels (this one and amx_attention.h) share about how they split a call.
//
// Below this many multiply-adds (scores plus weighted sum) a call stays on the calling thread.
inline constexpr std::int64_t kAttentionParallelMacs = 1 << 16;

// Total multiply-adds of a causal chunk: sum over queries of context length, times per-token work.
inline std::int64_t CausalWork(int n_tokens, int start_pos, std::int64_t per_token_pair) {
  const std::int64_t ctx_sum = static_cast<std::int64_t>(n_tokens) * start_pos +
                               static_cast<std::int64_t>(n_tokens) * (n_tokens + 1) / 2;
  return ctx_sum * per_token_pair;
}

// Whether every sequence of a GQA batch has the first's head layout: such a batch runs as one
// job, any other per sequence.
inline bool SameHeadLayout(std::span<const GqaAttentionParams> batch) {
  for (const GqaAttentionParams& p : batch) {
    if (p.n_heads != batch[0].n_heads || p.n_kv_heads != batch[0].n_kv_heads ||
        p.head_dim != batch[0].head_dim) {
      return false;
    }
  }
  return true;
}

TANDEM_KERNELS_ISA_END
