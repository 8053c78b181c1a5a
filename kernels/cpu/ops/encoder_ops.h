#pragma once
// Encoder (vision tower) ops of the CPU backends. The row-wise ones are plain loops shared by the
// reference and the fast backend (cheap next to the GEMMs); attention has a reference (scalar,
// per query) and a fast form (per head: tiled GEMMs on the pool, softmax rows spread over it).

#include <cstdint>

#include "runtime/thread_pool.h"
#include "simd/isa.h"
#include "tandem/kernels/attention_params.h"
#include "tandem/kernels/backend.h"
#include "tandem/kernels/dtype.h"

TANDEM_KERNELS_ISA_BEGIN

void LayerNorm(const float* x, std::int64_t rows, std::int64_t dim, const WeightView& weight,
               const WeightView& bias, float eps, float* y);
void Gelu(const float* x, std::int64_t n, GeluForm form, float* out);
void AddBias(float* y, std::int64_t rows, const WeightView& bias);

void FullAttentionReference(const FullAttentionParams& p);
void FullAttention(ThreadPool& pool, const FullAttentionParams& p);

TANDEM_KERNELS_ISA_END
