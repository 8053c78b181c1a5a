#include "checkpoint/weight_checks.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace tandem::model::internal {

absl::Status ExpectShape(absl::string_view name, const kernels::WeightView& w, std::int64_t rows,
                         std::int64_t cols) {
  if (w.data == nullptr) return absl::NotFoundError(absl::StrCat("missing tensor ", name));
  if (w.rows != rows || w.cols != cols) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": expected [", rows, ", ", cols, "], checkpoint has [", w.rows, ", ", w.cols, "]"));
  }
  return absl::OkStatus();
}

absl::Status CheckFinite(absl::string_view name, const kernels::WeightView& w) {
  const std::int64_t n = w.numel();
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = w.At(i / w.cols, i % w.cols);
    if (!std::isfinite(v)) {
      return absl::DataLossError(
          absl::StrCat(name, " holds a non-finite value (", v, ") at flat index ", i));
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::model::internal
