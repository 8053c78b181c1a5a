#include "names.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tandem::metrics::internal {
namespace {

bool IsNameChar(char c, bool allow_colon, bool first) {
  if (absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_') return true;
  if (allow_colon && c == ':') return true;
  return !first && absl::ascii_isdigit(static_cast<unsigned char>(c));
}

bool IsValidName(absl::string_view name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (!IsNameChar(name[i], allow_colon, i == 0)) return false;
  }
  return true;
}

}  // namespace

absl::Status ValidateMetricName(absl::string_view name) {
  if (!IsValidName(name, /*allow_colon=*/true)) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid metric name '", name, "': want [a-zA-Z_:][a-zA-Z0-9_:]*"));
  }
  return absl::OkStatus();
}

absl::Status ValidateLabelNames(absl::string_view metric, const std::vector<std::string>& names,
                                const std::vector<absl::string_view>& reserved) {
  absl::flat_hash_set<absl::string_view> seen;
  for (const std::string& name : names) {
    if (!IsValidName(name, /*allow_colon=*/false)) {
      return absl::InvalidArgumentError(absl::StrCat("metric '", metric, "': invalid label name '",
                                                     name, "': want [a-zA-Z_][a-zA-Z0-9_]*"));
    }
    if (absl::StartsWith(name, "__")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metric '", metric, "': label name '", name, "' starts with the reserved '__'"));
    }
    if (std::find(reserved.begin(), reserved.end(), absl::string_view(name)) != reserved.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric '", metric, "': label name '", name, "' is reserved"));
    }
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric '", metric, "': label name '", name, "' appears twice"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::metrics::internal
