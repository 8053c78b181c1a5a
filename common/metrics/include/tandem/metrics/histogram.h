#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace tandem::metrics {

// Observations counted into fixed buckets (latencies, prompt lengths). Observe() is lock-free:
// one atomic increment per bucket hit plus one for the sum.
class Histogram {
 public:
  // `upper_bounds` must be strictly increasing and finite; the registry checks this before
  // constructing one. The implicit last bucket is +Inf.
  explicit Histogram(std::vector<double> upper_bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // NaN observations are dropped: they would poison _sum for the life of the process.
  void Observe(double value);

  struct Snapshot {
    std::vector<double> upper_bounds;
    // One per bound plus the +Inf bucket, each counting observations <= its bound.
    std::vector<uint64_t> cumulative_counts;
    double sum = 0.0;
    uint64_t count = 0;  // Equals cumulative_counts.back().
  };
  Snapshot Snap() const;

  const std::vector<double>& upper_bounds() const { return upper_bounds_; }

 private:
  const std::vector<double> upper_bounds_;
  // Per-bucket (not cumulative) counts so Observe touches a single bucket.
  const std::unique_ptr<std::atomic<uint64_t>[]> bucket_counts_;
  std::atomic<double> sum_{0.0};
};

// `count` bounds: start, start+width, ...
std::vector<double> LinearBuckets(double start, double width, size_t count);
// `count` bounds: start, start*factor, ...
std::vector<double> ExponentialBuckets(double start, double factor, size_t count);

}  // namespace tandem::metrics
