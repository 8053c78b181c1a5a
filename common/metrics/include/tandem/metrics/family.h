#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "tandem/metrics/counter.h"
#include "tandem/metrics/gauge.h"
#include "tandem/metrics/histogram.h"

namespace tandem::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

// What every family shares, so the registry can render them without knowing their type.
class FamilyBase {
 public:
  FamilyBase(std::string name, std::string help, std::vector<std::string> label_names)
      : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)) {}
  virtual ~FamilyBase() = default;
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  virtual MetricType type() const = 0;

  // Appends this family's samples (not the # HELP / # TYPE header) in text format 0.0.4.
  virtual void AppendSamples(std::string* out) const = 0;

 private:
  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
};

// A metric with label names; one child metric per distinct tuple of label values.
//
//   auto* requests = registry.AddCounter("http_requests_total", "Requests.", {"code"}).value();
//   Counter* ok = requests->WithLabels({"200"}).value();  // lookup locks: cache the pointer
//   ok->Increment();                                      // hot path: one atomic add
template <typename M>
class Family final : public FamilyBase {
 public:
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::function<std::unique_ptr<M>()> make_child);

  MetricType type() const override {
    if constexpr (std::is_same_v<M, Counter>) return MetricType::kCounter;
    else if constexpr (std::is_same_v<M, Gauge>) return MetricType::kGauge;
    else return MetricType::kHistogram;
  }

  // The child for `label_values` (one per label name, in order), created on first use.
  // The pointer stays valid for the life of the registry unless that child is removed (below).
  // InvalidArgument on a count mismatch.
  absl::StatusOr<M*> WithLabels(absl::Span<const std::string> label_values);

  // Deletes the child for `label_values`: its series is gone from the next rendering (a departed
  // worker must not leave a frozen gauge behind). Returns whether there was one (false on a count
  // mismatch too). Every pointer WithLabels returned for these values dangles afterwards: whoever
  // cached one must drop it first, and no other thread may still be using it. A later WithLabels
  // with the same values makes a fresh child, starting at 0.
  bool Remove(absl::Span<const std::string> label_values);
  // Deletes every child whose value for the label `label_name` is `value` (e.g. all series of one
  // worker, whatever their other labels) and returns how many; 0 for a label the family does not
  // have. The same rule for cached pointers as Remove.
  std::size_t RemoveMatching(absl::string_view label_name, absl::string_view value);
  // Children alive now (series rendered, for histograms one per label tuple).
  std::size_t size() const;

  void AppendSamples(std::string* out) const override;

 private:
  const std::function<std::unique_ptr<M>()> make_child_;
  mutable absl::Mutex mu_;
  // Ordered so the exposition is deterministic; node-based so child pointers never move.
  std::map<std::vector<std::string>, std::unique_ptr<M>> children_ ABSL_GUARDED_BY(mu_);
};

extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;

}  // namespace tandem::metrics
