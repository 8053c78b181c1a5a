#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "tandem/metrics/family.h"

// Pieces of the Prometheus text exposition format 0.0.4.
namespace tandem::metrics::internal {

// Label values escape backslash, double quote and newline.
std::string EscapeLabelValue(absl::string_view value);
// Help text escapes backslash and newline only.
std::string EscapeHelp(absl::string_view help);
// Shortest round-trip decimal; +Inf, -Inf and NaN spelled as Prometheus expects.
std::string FormatValue(double value);

// `{a="x",b="y"}` (with `extra_name="extra_value"` appended when extra_name is non-empty), or
// nothing when there are no labels at all.
std::string FormatLabels(const std::vector<std::string>& names,
                         const std::vector<std::string>& values,
                         absl::string_view extra_name = "", absl::string_view extra_value = "");

absl::string_view TypeName(MetricType type);

}  // namespace tandem::metrics::internal
