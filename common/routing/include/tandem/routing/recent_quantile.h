#pragma once

#include <cstddef>
#include <vector>

namespace tandem::routing {

// A quantile of the last `window` values seen: the values in arrival order (a ring) and sorted, so
// adding one moves at most `window` doubles and reading a quantile is one index. No spikes: every
// Add costs the same, unlike re-selecting the quantile every so many values. Not thread-safe.
class RecentQuantile {
 public:
  explicit RecentQuantile(std::size_t window);

  // Non-finite values are ignored (they would sort past every quantile).
  void Add(double value);

  // The smallest held value with at least `q` (in [0, 1]) of the held values under or at it;
  // +infinity while nothing is held.
  double Quantile(double q) const;

  std::size_t size() const { return sorted_.size(); }
  std::size_t window() const { return window_; }

 private:
  std::size_t window_;
  std::vector<double> ring_;  // arrival order once full; ring_[next_] is the oldest
  std::vector<double> sorted_;
  std::size_t next_ = 0;
};

}  // namespace tandem::routing
