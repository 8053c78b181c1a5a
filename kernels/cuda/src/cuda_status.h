#pragma once
// CUDA and cuBLAS error codes as absl::Status, with what was being done.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace tandem::kernels::cuda {

// cudaErrorNoDevice and cudaErrorInsufficientDriver become FailedPrecondition (the machine cannot
// run CUDA at all, which a caller may want to tell apart); everything else is Internal.
absl::Status CudaStatus(cudaError_t e, const char* what);
absl::Status CublasStatus(cublasStatus_t s, const char* what);

}  // namespace tandem::kernels::cuda
