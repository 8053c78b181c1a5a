#include "text_format.h"

#include <charconv>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace tandem::metrics::internal {
namespace {

std::string Escape(absl::string_view text, bool escape_quotes) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '"':
        out += escape_quotes ? "\\\"" : "\"";
        break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string EscapeLabelValue(absl::string_view value) { return Escape(value, true); }
std::string EscapeHelp(absl::string_view help) { return Escape(help, false); }

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  if (ec != std::errc()) return "NaN";  // Unreachable: 64 bytes fit any double.
  return std::string(buf, end);
}

std::string FormatLabels(const std::vector<std::string>& names,
                         const std::vector<std::string>& values, absl::string_view extra_name,
                         absl::string_view extra_value) {
  if (names.empty() && extra_name.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    absl::StrAppend(&out, names[i], "=\"", EscapeLabelValue(values[i]), "\"");
  }
  if (!extra_name.empty()) {
    if (!names.empty()) out += ',';
    absl::StrAppend(&out, extra_name, "=\"", EscapeLabelValue(extra_value), "\"");
  }
  out += '}';
  return out;
}

absl::string_view TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

}  // namespace tandem::metrics::internal
