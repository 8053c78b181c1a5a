#pragma once
// The kernel launchers, shared by the .cu files (nvcc) and the host wrappers (g++). Kept free of
// absl and of anything nvcc need not parse: arguments are checked by the wrappers in ops.cc and
// gemm.cc, which turn the returned cudaError_t into absl::Status.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tandem::kernels::cuda::launch {

// Threads per CTA of every kernel here. Part of the numerics of the reductions (the tree's shape),
// so it is a constant, never a tuning knob chosen per call.
inline constexpr int kThreads = 256;

// weight_bf16: weight is BF16 (else F32).
cudaError_t RmsNorm(const float* x, std::int64_t rows, std::int64_t dim, const void* weight,
                    bool weight_bf16, float eps, float* y, cudaStream_t stream);
cudaError_t SiluMul(const float* gate, const float* up, std::int64_t n, float* out,
                    cudaStream_t stream);
cudaError_t Axpy(float alpha, const float* x, std::int64_t n, float* y, cudaStream_t stream);
cudaError_t Embed(const void* table, bool table_bf16, std::int64_t vocab, std::int64_t dim,
                  const std::int32_t* ids, std::int64_t rows, float* out, cudaStream_t stream);
// partials: [chunks][n_heads][dim], lses: [chunks][n_heads], seq_chunk_begin: [n_seqs + 1] (device
// memory, as MlaSplitPlan's), out: [n_seqs][n_heads][dim].
cudaError_t MlaCombine(const float* partials, const float* lses,
                       const std::int32_t* seq_chunk_begin, int n_seqs, int n_heads, int dim,
                       float* out, cudaStream_t stream);
// out[i] = bf16(in[i]), round to nearest even as F32ToBf16 (dtype.h).
cudaError_t F32ToBf16(const float* in, std::int64_t n, std::uint16_t* out, cudaStream_t stream);

}  // namespace tandem::kernels::cuda::launch
