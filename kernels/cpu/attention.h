#pragma once

#include "tandem/kernels/attention_params.h"
#include "thread_pool.h"

namespace tandem::kernels::cpu {

// Paged causal attention, one task per (query token, head). Each pair's output depends only on its
// query, its position and the cache, computed in a fixed order, so it is the same whether the
// token is alone in the call or in a chunk of any size.
void GqaAttention(ThreadPool& pool, const GqaAttentionParams& p);
void MlaAttention(ThreadPool& pool, const MlaAttentionParams& p);

}  // namespace tandem::kernels::cpu
