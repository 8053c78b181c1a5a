// RMSNorm, SiLU-mul and Axpy: the reference backend's loops, one thread per element (one CTA per
// row for RMSNorm's reduction).
#include "device_math.cuh"
#include "launch.h"

namespace tandem::kernels::cuda::launch {
namespace {

static_assert(kThreads % 32 == 0 && kThreads / 32 <= 32, "one warp must finish the reduction");

// Sum of v over the CTA in a fixed tree: each warp by butterfly shuffles, then warp 0 over the
// warps' sums. Every thread gets the result. The shape depends on kThreads alone, never on the
// data or the grid, so a row reduces the same way in every batch.
__device__ float BlockSum(float v) {
  __shared__ float warp_sums[kThreads / 32];
  __shared__ float total;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffU, v, o);
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / 32 ? warp_sums[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffU, v, o);
    if (lane == 0) total = v;
  }
  __syncthreads();
  return total;
}

template <bool kBf16>
__global__ void __launch_bounds__(kThreads)
    RmsNormKernel(const float* x, std::int64_t dim, const void* weight, float eps, float* y) {
  const float* xr = x + static_cast<std::int64_t>(blockIdx.x) * dim;
  float* yr = y + static_cast<std::int64_t>(blockIdx.x) * dim;
  float ss = 0.0f;
  for (std::int64_t i = threadIdx.x; i < dim; i += kThreads) ss += xr[i] * xr[i];
  // BlockSum's barriers also order every read of xr before any write of yr (they may alias).
  ss = BlockSum(ss);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
  for (std::int64_t i = threadIdx.x; i < dim; i += kThreads) {
    const float w = kBf16 ? device::Bf16ToF32(static_cast<const std::uint16_t*>(weight)[i])
                          : static_cast<const float*>(weight)[i];
    yr[i] = xr[i] * inv * w;
  }
}

__global__ void SiluMulKernel(const float* gate, const float* up, std::int64_t n, float* out) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

__global__ void AxpyKernel(float alpha, const float* x, std::int64_t n, float* y) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    y[i] += alpha * x[i];
  }
}

}  // namespace

cudaError_t RmsNorm(const float* x, std::int64_t rows, std::int64_t dim, const void* weight,
                    bool weight_bf16, float eps, float* y, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(rows));
  if (weight_bf16) {
    RmsNormKernel<true><<<grid, kThreads, 0, stream>>>(x, dim, weight, eps, y);
  } else {
    RmsNormKernel<false><<<grid, kThreads, 0, stream>>>(x, dim, weight, eps, y);
  }
  return cudaGetLastError();
}

cudaError_t SiluMul(const float* gate, const float* up, std::int64_t n, float* out,
                    cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  SiluMulKernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(gate, up, n, out);
  return cudaGetLastError();
}

cudaError_t Axpy(float alpha, const float* x, std::int64_t n, float* y, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  AxpyKernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(alpha, x, n, y);
  return cudaGetLastError();
}

}  // namespace tandem::kernels::cuda::launch
