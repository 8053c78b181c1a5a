#pragma once
// The first CUDA kernels, as host functions over device memory: each enqueues its work on
// `stream` and returns once it is enqueued. A returned error is a bad argument or a failed launch;
// a fault while the kernel runs shows at the next synchronisation, as with any CUDA work.
//
// Semantics are the reference CPU backend's (kernels/cpu/reference_backend.cc) op for op; the
// kernels are compiled with --fmad=false so that, as on the CPU (-ffp-contract=off), a multiply and
// an add are never fused behind the code's back. docs/cuda.md lists each op's tolerance against
// the reference and which ops are batch invariant.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "tandem/kernels/dtype.h"

namespace tandem::kernels::cuda {

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight; x and y may alias. weight: [1][dim], F32 or
// BF16. One CTA per row with a fixed reduction tree, so a row's bits do not depend on `rows`.
absl::Status RmsNorm(const float* x, std::int64_t rows, std::int64_t dim, const WeightView& weight,
                     float eps, float* y, cudaStream_t stream);

// out[i] = silu(gate[i]) * up[i] over rows * hidden elements.
absl::Status SiluMul(const float* gate, const float* up, std::int64_t rows, std::int64_t hidden,
                     float* out, cudaStream_t stream);

// y[i] += alpha * x[i] (a multiply, then an add: bit-identical to the reference).
absl::Status Axpy(float alpha, const float* x, std::int64_t n, float* y, cudaStream_t stream);

// out[r] = table[ids[r]]; table F32 or BF16 (widened exactly). ids live in device memory, so they
// cannot be checked here: an id outside [0, table.rows) yields a row of NaN, never a read outside
// the table.
absl::Status Embed(const WeightView& table, const std::int32_t* ids, std::int64_t rows,
                   float* out, cudaStream_t stream);

// The combine step of split MLA decode: gpu_plan::CombineChunkPartials (mla_split_plan.h) for
// every sequence b and head h, over chunks [seq_chunk_begin[b], seq_chunk_begin[b + 1]) in chunk
// order, so a sequence's output is the same bits in any batch. partials: [chunks][n_heads][dim],
// lses: [chunks][n_heads], seq_chunk_begin: [n_seqs + 1] (MlaSplitPlan's, copied to the device),
// out: [n_seqs][n_heads][dim]. A sequence without chunks gets zeros.
absl::Status MlaCombine(const float* partials, const float* lses,
                        const std::int32_t* seq_chunk_begin, int n_seqs, int n_heads, int dim,
                        float* out, cudaStream_t stream);

}  // namespace tandem::kernels::cuda
