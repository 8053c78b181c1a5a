#include "tandem/metrics/registry.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "names.h"
#include "tandem/base/status_macros.h"
#include "text_format.h"

namespace tandem::metrics {
namespace {

// Every sample name a family exposes; two families must not share any of them.
std::vector<std::string> SampleNames(absl::string_view name, MetricType type) {
  if (type != MetricType::kHistogram) return {std::string(name)};
  return {std::string(name), absl::StrCat(name, "_bucket"), absl::StrCat(name, "_sum"),
          absl::StrCat(name, "_count")};
}

absl::Status ValidateBuckets(absl::string_view metric, const std::vector<double>& bounds) {
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "histogram '", metric, "': bucket bound ", i, " is not finite (+Inf is implicit)"));
    }
    if (i > 0 && !(bounds[i] > bounds[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "histogram '", metric, "': bucket bounds must be strictly increasing, bound ", i, " (",
          bounds[i], ") <= bound ", i - 1, " (", bounds[i - 1], ")"));
    }
  }
  return absl::OkStatus();
}

template <typename M>
absl::StatusOr<Family<M>*> Publish(std::vector<std::unique_ptr<FamilyBase>>& families,
                                   std::unique_ptr<Family<M>> family) {
  Family<M>* raw = family.get();
  if (raw->label_names().empty()) {
    // Unlabelled families show up as 0 from the first scrape instead of appearing later.
    TANDEM_RETURN_IF_ERROR(raw->WithLabels({}).status());
  }
  families.push_back(std::move(family));
  return raw;
}

}  // namespace

absl::Status Registry::Reserve(absl::string_view name, const std::vector<std::string>& label_names,
                               MetricType type) {
  TANDEM_RETURN_IF_ERROR(internal::ValidateMetricName(name));
  std::vector<absl::string_view> reserved;
  if (type == MetricType::kHistogram) reserved.push_back("le");
  TANDEM_RETURN_IF_ERROR(internal::ValidateLabelNames(name, label_names, reserved));
  const std::vector<std::string> samples = SampleNames(name, type);
  for (const std::string& sample : samples) {
    if (sample_names_.contains(sample)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "metric '", name, "': sample name '", sample, "' is already used by another metric"));
    }
  }
  sample_names_.insert(samples.begin(), samples.end());
  return absl::OkStatus();
}

absl::StatusOr<Family<Counter>*> Registry::AddCounter(absl::string_view name,
                                                      absl::string_view help,
                                                      std::vector<std::string> label_names) {
  absl::MutexLock lock(&mu_);
  TANDEM_RETURN_IF_ERROR(Reserve(name, label_names, MetricType::kCounter));
  return Publish(families_, std::make_unique<Family<Counter>>(
                                std::string(name), std::string(help), std::move(label_names),
                                [] { return std::make_unique<Counter>(); }));
}

absl::StatusOr<Family<Gauge>*> Registry::AddGauge(absl::string_view name, absl::string_view help,
                                                  std::vector<std::string> label_names) {
  absl::MutexLock lock(&mu_);
  TANDEM_RETURN_IF_ERROR(Reserve(name, label_names, MetricType::kGauge));
  return Publish(families_, std::make_unique<Family<Gauge>>(
                                std::string(name), std::string(help), std::move(label_names),
                                [] { return std::make_unique<Gauge>(); }));
}

absl::StatusOr<Family<Histogram>*> Registry::AddHistogram(absl::string_view name,
                                                          absl::string_view help,
                                                          std::vector<double> upper_bounds,
                                                          std::vector<std::string> label_names) {
  TANDEM_RETURN_IF_ERROR(ValidateBuckets(name, upper_bounds));
  absl::MutexLock lock(&mu_);
  TANDEM_RETURN_IF_ERROR(Reserve(name, label_names, MetricType::kHistogram));
  return Publish(families_,
                 std::make_unique<Family<Histogram>>(
                     std::string(name), std::string(help), std::move(label_names),
                     [bounds = std::move(upper_bounds)] {
                       return std::make_unique<Histogram>(bounds);
                     }));
}

std::string Registry::RenderText() const {
  std::string out;
  absl::MutexLock lock(&mu_);
  for (const std::unique_ptr<FamilyBase>& family : families_) {
    absl::StrAppend(&out, "# HELP ", family->name(), " ", internal::EscapeHelp(family->help()),
                    "\n# TYPE ", family->name(), " ", internal::TypeName(family->type()), "\n");
    family->AppendSamples(&out);
  }
  return out;
}

}  // namespace tandem::metrics
