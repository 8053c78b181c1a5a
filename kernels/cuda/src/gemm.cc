#include "tandem/kernels/cuda/gemm.h"

#include <cublas_v2.h>

#include <limits>

#include "absl/strings/str_cat.h"
#include "cuda_status.h"
#include "launch.h"

namespace tandem::kernels::cuda {
namespace {

// cublasGemmEx takes int dimensions.
bool FitsInt(std::int64_t v) { return v >= 0 && v <= std::numeric_limits<int>::max(); }

}  // namespace

absl::StatusOr<std::unique_ptr<CublasGemm>> CublasGemm::Create(
    std::int64_t max_activation_elements) {
  if (max_activation_elements < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CublasGemm: staging of ", max_activation_elements, " elements"));
  }
  cublasHandle_t handle = nullptr;
  if (absl::Status s = CublasStatus(cublasCreate(&handle), "cublasCreate"); !s.ok()) return s;
  void* staging = nullptr;
  if (max_activation_elements > 0) {
    const cudaError_t e =
        cudaMalloc(&staging, static_cast<std::size_t>(max_activation_elements) * 2);
    if (e != cudaSuccess) {
      cublasDestroy(handle);
      return CudaStatus(e, "CublasGemm staging buffer");
    }
  }
  return std::unique_ptr<CublasGemm>(
      new CublasGemm(handle, static_cast<std::uint16_t*>(staging), max_activation_elements));
}

CublasGemm::~CublasGemm() {
  cudaFree(staging_);
  cublasDestroy(handle_);
}

absl::Status CublasGemm::MatMul(const float* x, std::int64_t rows, const WeightView& w, float* y,
                                cudaStream_t stream) {
  if (!FitsInt(rows) || !FitsInt(w.rows) || !FitsInt(w.cols) || w.cols == 0) {
    return absl::InvalidArgumentError(absl::StrCat("MatMul: ", rows, " x [", w.rows, " x ",
                                                   w.cols, "] outside cuBLAS's int dimensions"));
  }
  if (w.layout != WeightLayout::kRows) {
    return absl::InvalidArgumentError("MatMul: cuBLAS takes row-major weights, not CPU panels");
  }
  if (rows == 0 || w.rows == 0) return absl::OkStatus();
  if (x == nullptr || y == nullptr || w.data == nullptr) {
    return absl::InvalidArgumentError("MatMul: null pointer");
  }
  if (absl::Status s = CublasStatus(cublasSetStream(handle_, stream), "cublasSetStream");
      !s.ok()) {
    return s;
  }
  // cuBLAS is column-major: row-major w[out][in] reads as an in x out matrix, so op(A) = A^T gives
  // out x in; x reads as in x rows; and the out x rows column-major result is row-major y.
  const int m = static_cast<int>(w.rows);
  const int n = static_cast<int>(rows);
  const int k = static_cast<int>(w.cols);
  const float alpha = 1.0f;
  const float beta = 0.0f;
  const void* b = x;
  cudaDataType_t ab_type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F_PEDANTIC;
  switch (w.dtype) {
    case DType::kF32: break;
    case DType::kBF16: {
      const std::int64_t elements = rows * w.cols;
      if (elements > staging_elements_) {
        return absl::ResourceExhaustedError(
            absl::StrCat("MatMul: ", elements, " bf16 activations, staging holds ",
                         staging_elements_, " (CublasGemm::Create's max_activation_elements)"));
      }
      if (absl::Status s = CudaStatus(launch::F32ToBf16(x, elements, staging_, stream),
                                      "MatMul: activations to bf16");
          !s.ok()) {
        return s;
      }
      b = staging_;
      ab_type = CUDA_R_16BF;
      compute = CUBLAS_COMPUTE_32F;
      break;
    }
    default:
      return absl::UnimplementedError(absl::StrCat("MatMul: ", std::string(DTypeName(w.dtype)),
                                                   " weights on CUDA (F32, BF16 only)"));
  }
  return CublasStatus(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, w.data,
                                   ab_type, k, b, ab_type, k, &beta, y, CUDA_R_32F, m, compute,
                                   CUBLAS_GEMM_DEFAULT),
                      "cublasGemmEx");
}

}  // namespace tandem::kernels::cuda
