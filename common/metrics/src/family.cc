#include "tandem/metrics/family.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "text_format.h"

namespace tandem::metrics {
namespace {

using internal::FormatLabels;
using internal::FormatValue;

// Counter or Gauge: one sample per child.
template <typename Scalar>
void AppendChild(const FamilyBase& family, const std::vector<std::string>& values,
                 const Scalar& metric, std::string* out) {
  absl::StrAppend(out, family.name(), FormatLabels(family.label_names(), values), " ",
                  FormatValue(metric.Value()), "\n");
}

void AppendChild(const FamilyBase& family, const std::vector<std::string>& values,
                 const Histogram& histogram, std::string* out) {
  const Histogram::Snapshot snap = histogram.Snap();
  const std::vector<std::string>& names = family.label_names();
  for (size_t i = 0; i < snap.cumulative_counts.size(); ++i) {
    const std::string le =
        i < snap.upper_bounds.size() ? FormatValue(snap.upper_bounds[i]) : std::string("+Inf");
    absl::StrAppend(out, family.name(), "_bucket", FormatLabels(names, values, "le", le), " ",
                    snap.cumulative_counts[i], "\n");
  }
  const std::string labels = FormatLabels(names, values);
  absl::StrAppend(out, family.name(), "_sum", labels, " ", FormatValue(snap.sum), "\n");
  absl::StrAppend(out, family.name(), "_count", labels, " ", snap.count, "\n");
}

}  // namespace

template <typename M>
Family<M>::Family(std::string name, std::string help, std::vector<std::string> label_names,
                  std::function<std::unique_ptr<M>()> make_child)
    : FamilyBase(std::move(name), std::move(help), std::move(label_names)),
      make_child_(std::move(make_child)) {}

template <typename M>
absl::StatusOr<M*> Family<M>::WithLabels(absl::Span<const std::string> label_values) {
  if (label_values.size() != label_names().size()) {
    return absl::InvalidArgumentError(absl::StrCat("metric '", name(), "' has ",
                                                   label_names().size(), " label(s), got ",
                                                   label_values.size(), " value(s)"));
  }
  std::vector<std::string> key(label_values.begin(), label_values.end());
  absl::MutexLock lock(&mu_);
  std::unique_ptr<M>& child = children_[std::move(key)];
  if (child == nullptr) child = make_child_();
  return child.get();
}

template <typename M>
bool Family<M>::Remove(absl::Span<const std::string> label_values) {
  if (label_values.size() != label_names().size()) return false;
  const std::vector<std::string> key(label_values.begin(), label_values.end());
  std::unique_ptr<M> removed;  // destroyed outside the lock
  absl::MutexLock lock(&mu_);
  auto it = children_.find(key);
  if (it == children_.end()) return false;
  removed = std::move(it->second);
  children_.erase(it);
  return true;
}

template <typename M>
std::size_t Family<M>::RemoveMatching(absl::string_view label_name, absl::string_view value) {
  const std::vector<std::string>& names = label_names();
  const auto pos = std::find(names.begin(), names.end(), label_name);
  if (pos == names.end()) return 0;
  const std::size_t index = static_cast<std::size_t>(pos - names.begin());
  std::vector<std::unique_ptr<M>> removed;  // destroyed outside the lock
  absl::MutexLock lock(&mu_);
  for (auto it = children_.begin(); it != children_.end();) {
    if (it->first[index] == value) {
      removed.push_back(std::move(it->second));
      it = children_.erase(it);
    } else {
      ++it;
    }
  }
  return removed.size();
}

template <typename M>
std::size_t Family<M>::size() const {
  absl::MutexLock lock(&mu_);
  return children_.size();
}

template <typename M>
void Family<M>::AppendSamples(std::string* out) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [values, child] : children_) AppendChild(*this, values, *child, out);
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

}  // namespace tandem::metrics
