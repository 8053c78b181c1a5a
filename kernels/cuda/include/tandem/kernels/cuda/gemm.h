#pragma once
// MatMul on the GPU through cuBLAS, with the weights used in place in their stored dtype.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tandem/kernels/dtype.h"

struct cublasContext;  // cublas_v2.h's handle, kept out of this header

namespace tandem::kernels::cuda {

// y[r][o] = sum_i x[r][i] * w[o][i], the reference backend's MatMul (x: [rows][w.cols] f32,
// y: [rows][w.rows] f32, all device memory).
//
// F32 weights: a full-precision f32 GEMM (CUBLAS_COMPUTE_32F_PEDANTIC: no TF32, whatever the
// environment says). BF16 weights: cuBLAS has no f32 x bf16 GEMM, so x is first rounded to bf16
// (to nearest even) in a staging buffer this object owns, then a bf16 x bf16 GEMM accumulates in
// f32. That rounding is the one deviation from the reference: at most 2^-9 of sum |x * w| per
// output. F16 and FP8 weights are not implemented yet (Unimplemented).
//
// Not batch invariant: cuBLAS picks its algorithm (and may split the reduction) by shape, so a
// row's bits can depend on `rows`. A fixed-order GEMM is on docs/cuda.md's list.
//
// One object per stream (or per thread): the cuBLAS handle and the staging buffer are used by one
// call at a time, in stream order.
class CublasGemm {
 public:
  // max_activation_elements: the largest rows * w.cols a call will see with BF16 weights (the
  // staging buffer's size in bf16 elements; 0 for F32 weights only).
  static absl::StatusOr<std::unique_ptr<CublasGemm>> Create(std::int64_t max_activation_elements);
  ~CublasGemm();
  CublasGemm(const CublasGemm&) = delete;
  CublasGemm& operator=(const CublasGemm&) = delete;

  absl::Status MatMul(const float* x, std::int64_t rows, const WeightView& w, float* y,
                      cudaStream_t stream);

 private:
  CublasGemm(cublasContext* handle, std::uint16_t* staging, std::int64_t staging_elements)
      : handle_(handle), staging_(staging), staging_elements_(staging_elements) {}

  cublasContext* handle_;
  std::uint16_t* staging_;  // device memory, bf16 bits
  std::int64_t staging_elements_;
};

}  // namespace tandem::kernels::cuda
