#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tandem::metrics::internal {

// [a-zA-Z_:][a-zA-Z0-9_:]*
absl::Status ValidateMetricName(absl::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (reserved by Prometheus), no duplicates, and
// none of `reserved` (histograms reserve "le").
absl::Status ValidateLabelNames(absl::string_view metric, const std::vector<std::string>& names,
                                const std::vector<absl::string_view>& reserved);

}  // namespace tandem::metrics::internal
