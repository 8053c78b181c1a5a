#include "tandem/metrics/histogram.h"

#include <algorithm>
#include <cmath>

namespace tandem::metrics {

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)),
      bucket_counts_(new std::atomic<uint64_t>[upper_bounds_.size() + 1]) {
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) bucket_counts_[i].store(0);
}

void Histogram::Observe(double value) {
  if (std::isnan(value)) return;
  // Buckets are "less than or equal": the first bound >= value owns it; past the end is +Inf.
  const size_t bucket =
      std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin();
  bucket_counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Snap() const {
  Snapshot snap;
  snap.upper_bounds = upper_bounds_;
  snap.cumulative_counts.resize(upper_bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) {
    running += bucket_counts_[i].load(std::memory_order_relaxed);
    snap.cumulative_counts[i] = running;
  }
  // _count is derived from the buckets so a scrape racing Observe stays self-consistent.
  snap.count = running;
  snap.sum = sum_.load(std::memory_order_relaxed);
  return snap;
}

std::vector<double> LinearBuckets(double start, double width, size_t count) {
  std::vector<double> bounds(count);
  for (size_t i = 0; i < count; ++i) bounds[i] = start + width * static_cast<double>(i);
  return bounds;
}

std::vector<double> ExponentialBuckets(double start, double factor, size_t count) {
  std::vector<double> bounds(count);
  double bound = start;
  for (size_t i = 0; i < count; ++i, bound *= factor) bounds[i] = bound;
  return bounds;
}

}  // namespace tandem::metrics
