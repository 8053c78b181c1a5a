#pragma once

#include <span>

#include "isa.h"
#include "tandem/kernels/attention_params.h"
#include "thread_pool.h"

TANDEM_KERNELS_ISA_BEGIN

// Paged causal attention for a batch of sequences' query chunks, spread over the pool as one job
// of (query token, run of heads) units. Each (token, head)'s output depends only on its query, its
// position and its cache, computed in a fixed order: the same alone, in a chunk of any size, or
// in a batch of any sequences.
void GqaAttention(ThreadPool& pool, std::span<const GqaAttentionParams> batch);
void MlaAttention(ThreadPool& pool, std::span<const MlaAttentionParams> batch);

TANDEM_KERNELS_ISA_END
