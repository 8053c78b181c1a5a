// The combine step of split MLA decode: CombineChunkPartials (gpu_plan/mla_split_plan.h) on the
// device, one CTA per (sequence, head).
#include <cmath>

#include "launch.h"

namespace tandem::kernels::cuda::launch {
namespace {

// Every thread walks the sequence's chunks in chunk order for the max and the sum of weights (the
// same few floats, so all threads agree bit for bit) and then for its own output elements: the
// order never depends on the thread, the grid or the other sequences.
__global__ void __launch_bounds__(kThreads)
    MlaCombineKernel(const float* partials, const float* lses, const std::int32_t* seq_chunk_begin,
                     int n_heads, int dim, float* out) {
  const int seq = blockIdx.x / n_heads;
  const int head = blockIdx.x % n_heads;
  const int first = seq_chunk_begin[seq];
  const int last = seq_chunk_begin[seq + 1];
  float m = -INFINITY;
  for (int c = first; c < last; ++c) {
    m = fmaxf(m, lses[static_cast<std::int64_t>(c) * n_heads + head]);
  }
  float sum = 0.0f;
  for (int c = first; c < last; ++c) {
    sum += expf(lses[static_cast<std::int64_t>(c) * n_heads + head] - m);
  }
  const float lse = m + logf(sum);
  float* o = out + (static_cast<std::int64_t>(seq) * n_heads + head) * dim;
  for (int d = threadIdx.x; d < dim; d += kThreads) {
    float acc = 0.0f;
    for (int c = first; c < last; ++c) {
      const std::int64_t ch = static_cast<std::int64_t>(c) * n_heads + head;
      acc += expf(lses[ch] - lse) * partials[ch * dim + d];
    }
    o[d] = acc;
  }
}

}  // namespace

cudaError_t MlaCombine(const float* partials, const float* lses,
                       const std::int32_t* seq_chunk_begin, int n_seqs, int n_heads, int dim,
                       float* out, cudaStream_t stream) {
  if (n_seqs == 0 || n_heads == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(n_seqs) * static_cast<unsigned>(n_heads));
  MlaCombineKernel<<<grid, kThreads, 0, stream>>>(partials, lses, seq_chunk_begin, n_heads, dim,
                                                  out);
  return cudaGetLastError();
}

}  // namespace tandem::kernels::cuda::launch
