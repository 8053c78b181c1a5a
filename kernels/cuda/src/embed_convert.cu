// Table lookups and dtype conversion: pure data movement, exact on every element.
#include <cmath>

#include "device_math.cuh"
#include "launch.h"

namespace tandem::kernels::cuda::launch {
namespace {

// One CTA per output row.
template <bool kBf16>
__global__ void EmbedKernel(const void* table, std::int64_t vocab, std::int64_t dim,
                            const std::int32_t* ids, float* out) {
  const std::int64_t r = blockIdx.x;
  const std::int32_t id = ids[r];
  float* o = out + r * dim;
  if (id < 0 || id >= vocab) {
    for (std::int64_t i = threadIdx.x; i < dim; i += blockDim.x) o[i] = NAN;
    return;
  }
  const std::int64_t base = static_cast<std::int64_t>(id) * dim;
  for (std::int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    o[i] = kBf16 ? device::Bf16ToF32(static_cast<const std::uint16_t*>(table)[base + i])
                 : static_cast<const float*>(table)[base + i];
  }
}

__global__ void F32ToBf16Kernel(const float* in, std::int64_t n, std::uint16_t* out) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    out[i] = device::F32ToBf16(in[i]);
  }
}

}  // namespace

cudaError_t Embed(const void* table, bool table_bf16, std::int64_t vocab, std::int64_t dim,
                  const std::int32_t* ids, std::int64_t rows, float* out, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(rows));
  if (table_bf16) {
    EmbedKernel<true><<<grid, kThreads, 0, stream>>>(table, vocab, dim, ids, out);
  } else {
    EmbedKernel<false><<<grid, kThreads, 0, stream>>>(table, vocab, dim, ids, out);
  }
  return cudaGetLastError();
}

cudaError_t F32ToBf16(const float* in, std::int64_t n, std::uint16_t* out, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  F32ToBf16Kernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(in, n, out);
  return cudaGetLastError();
}

}  // namespace tandem::kernels::cuda::launch
