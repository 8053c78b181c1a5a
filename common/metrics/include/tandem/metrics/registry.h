#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "tandem/metrics/family.h"

namespace tandem::metrics {

// Owns metric families and renders them for a Prometheus scrape. There is deliberately no
// global instance: each service creates one and passes it to the components it wires up.
// All methods are thread-safe.
class Registry {
 public:
  // Content-Type of RenderText()'s output.
  static constexpr absl::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Errors: InvalidArgument for a bad metric or label name (or a duplicated / reserved label
  // name, or bad buckets); AlreadyExists when any sample name the family would expose
  // (for histograms: name_bucket, name_sum, name_count) is already exposed by another family.
  // A family without labels has its single child created at once, so it is rendered as 0.
  absl::StatusOr<Family<Counter>*> AddCounter(absl::string_view name, absl::string_view help,
                                              std::vector<std::string> label_names = {});
  absl::StatusOr<Family<Gauge>*> AddGauge(absl::string_view name, absl::string_view help,
                                          std::vector<std::string> label_names = {});
  // `upper_bounds`: strictly increasing, finite; +Inf is implicit. May be empty.
  absl::StatusOr<Family<Histogram>*> AddHistogram(absl::string_view name, absl::string_view help,
                                                  std::vector<double> upper_bounds,
                                                  std::vector<std::string> label_names = {});

  // Prometheus text exposition format 0.0.4, families in registration order.
  std::string RenderText() const;

 private:
  absl::Status Reserve(absl::string_view name, const std::vector<std::string>& label_names,
                       MetricType type) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<FamilyBase>> families_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> sample_names_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::metrics
