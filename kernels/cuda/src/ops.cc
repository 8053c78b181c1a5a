// Argument checks for the elementwise kernels, done on the host before anything is enqueued so
// that a bad call fails with a message instead of a fault found later at a synchronisation.
#include "tandem/kernels/cuda/ops.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "cuda_status.h"
#include "launch.h"

namespace tandem::kernels::cuda {
namespace {

// The row kernels put one CTA per row in gridDim.x.
constexpr std::int64_t kMaxRows = std::numeric_limits<std::int32_t>::max();

absl::Status CheckRows(const char* op, std::int64_t rows, std::int64_t dim) {
  if (rows < 0 || rows > kMaxRows || dim <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": rows ", rows, " (0 to ", kMaxRows, "), dim ", dim, " (> 0)"));
  }
  return absl::OkStatus();
}

absl::Status CheckF32OrBf16(const char* op, const WeightView& w) {
  if (w.dtype != DType::kF32 && w.dtype != DType::kBF16) {
    return absl::UnimplementedError(absl::StrCat(op, ": ", std::string(DTypeName(w.dtype)),
                                                 " weights on CUDA (F32, BF16 only)"));
  }
  if (w.data == nullptr) return absl::InvalidArgumentError(absl::StrCat(op, ": no weight data"));
  return absl::OkStatus();
}

absl::Status CheckPointers(const char* op, std::int64_t n, std::initializer_list<const void*> ps) {
  if (n == 0) return absl::OkStatus();
  for (const void* p : ps) {
    if (p == nullptr) return absl::InvalidArgumentError(absl::StrCat(op, ": null pointer"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RmsNorm(const float* x, std::int64_t rows, std::int64_t dim, const WeightView& weight,
                     float eps, float* y, cudaStream_t stream) {
  if (absl::Status s = CheckRows("RmsNorm", rows, dim); !s.ok()) return s;
  if (absl::Status s = CheckF32OrBf16("RmsNorm", weight); !s.ok()) return s;
  if (weight.numel() < dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("RmsNorm: weight of ", weight.numel(), " elements for dim ", dim));
  }
  if (absl::Status s = CheckPointers("RmsNorm", rows, {x, y}); !s.ok()) return s;
  return CudaStatus(launch::RmsNorm(x, rows, dim, weight.data, weight.dtype == DType::kBF16, eps,
                                    y, stream),
                    "RmsNorm launch");
}

absl::Status SiluMul(const float* gate, const float* up, std::int64_t rows, std::int64_t hidden,
                     float* out, cudaStream_t stream) {
  if (absl::Status s = CheckRows("SiluMul", rows, hidden); !s.ok()) return s;
  if (absl::Status s = CheckPointers("SiluMul", rows, {gate, up, out}); !s.ok()) return s;
  return CudaStatus(launch::SiluMul(gate, up, rows * hidden, out, stream), "SiluMul launch");
}

absl::Status Axpy(float alpha, const float* x, std::int64_t n, float* y, cudaStream_t stream) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat("Axpy: n ", n));
  if (absl::Status s = CheckPointers("Axpy", n, {x, y}); !s.ok()) return s;
  return CudaStatus(launch::Axpy(alpha, x, n, y, stream), "Axpy launch");
}

absl::Status Embed(const WeightView& table, const std::int32_t* ids, std::int64_t rows,
                   float* out, cudaStream_t stream) {
  if (absl::Status s = CheckRows("Embed", rows, table.cols); !s.ok()) return s;
  if (absl::Status s = CheckF32OrBf16("Embed", table); !s.ok()) return s;
  if (absl::Status s = CheckPointers("Embed", rows, {ids, out}); !s.ok()) return s;
  return CudaStatus(launch::Embed(table.data, table.dtype == DType::kBF16, table.rows, table.cols,
                                  ids, rows, out, stream),
                    "Embed launch");
}

absl::Status MlaCombine(const float* partials, const float* lses,
                        const std::int32_t* seq_chunk_begin, int n_seqs, int n_heads, int dim,
                        float* out, cudaStream_t stream) {
  // One CTA per (sequence, head) in gridDim.x.
  if (n_seqs < 0 || n_heads < 0 || dim <= 0 ||
      static_cast<std::int64_t>(n_seqs) * n_heads > kMaxRows) {
    return absl::InvalidArgumentError(absl::StrCat("MlaCombine: ", n_seqs, " sequences x ",
                                                   n_heads, " heads, dim ", dim));
  }
  if (absl::Status s = CheckPointers("MlaCombine", std::int64_t{n_seqs} * n_heads,
                                     {partials, lses, seq_chunk_begin, out});
      !s.ok()) {
    return s;
  }
  return CudaStatus(
      launch::MlaCombine(partials, lses, seq_chunk_begin, n_seqs, n_heads, dim, out, stream),
      "MlaCombine launch");
}

}  // namespace tandem::kernels::cuda
