#pragma once

#include <span>

#include "runtime/thread_pool.h"
#include "simd/isa.h"
#include "tandem/kernels/attention_params.h"

// The AVX-512 copy only: the other copies compile this to nothing.
#if defined(TANDEM_SIMD_AVX512)
TANDEM_KERNELS_ISA_BEGIN

// GqaAttention (attention.h) in bf16 products on AMX tiles, for a backend whose bf16 arithmetic is
// CpuBackendOptions::bf16_matmul = kAmx. Per (token, head): score(t) = scale * sum_d bf16(q[d]) *
// bf16(k_t[d]) (TDPBF16PS over 32 dims at a time, in dim order, onto 0); the softmax over
// positions [0, ctx) in float32 exactly as the float32 kernel's (ExpAndSum); out[d] =
// sum_t bf16(p_t) * bf16(v_t[d]) (TDPBF16PS over 32 positions at a time, from position 0). A
// (token, head)'s bits depend only on its query, its position and its cache: positions past its
// own that share its tiles enter with weight exactly 0 and cache padding is 0, so it gets the same
// bits alone (decode), in a chunk of any size, or in any batch.
void AmxGqaAttention(ThreadPool& pool, std::span<const GqaAttentionParams> batch);
// The same with AVX512-BF16's VDPBF16PS on the same packed operands, for kAvx512Bf16 (CPUs without
// AMX): each score and each output dim is one float32 accumulator onto which the instruction adds
// one pair (of dims, of positions) at a time in order from 0; batch invariant for the same
// reasons; its bits differ from AMX's.
void Dpbf16GqaAttention(ThreadPool& pool, std::span<const GqaAttentionParams> batch);

TANDEM_KERNELS_ISA_END
#endif  // TANDEM_SIMD_AVX512
