#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tandem/kernels/dtype.h"

namespace tandem::model::internal {

// Shape check with an error that names the tensor, e.g. "model.layers.3.self_attn.o_proj.weight:
// expected [64, 128], checkpoint has [64, 96]".
absl::Status ExpectShape(absl::string_view name, const kernels::WeightView& w, std::int64_t rows,
                         std::int64_t cols);

// Fails with the tensor's name and the first offending index when a weight holds NaN or Inf.
absl::Status CheckFinite(absl::string_view name, const kernels::WeightView& w);

}  // namespace tandem::model::internal
