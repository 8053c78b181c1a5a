#include "tandem/routing/recent_quantile.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tandem::routing {

RecentQuantile::RecentQuantile(std::size_t window) : window_(std::max<std::size_t>(1, window)) {
  ring_.reserve(window_);
  sorted_.reserve(window_);
}

void RecentQuantile::Add(double value) {
  if (!std::isfinite(value)) return;
  if (ring_.size() < window_) {
    ring_.push_back(value);
  } else {
    const double oldest = ring_[next_];
    sorted_.erase(std::lower_bound(sorted_.begin(), sorted_.end(), oldest));
    ring_[next_] = value;
    next_ = (next_ + 1) % window_;
  }
  sorted_.insert(std::upper_bound(sorted_.begin(), sorted_.end(), value), value);
}

double RecentQuantile::Quantile(double q) const {
  if (sorted_.empty()) return std::numeric_limits<double>::infinity();
  const double clamped = std::clamp(q, 0.0, 1.0);
  // The rank with at least q of the values at or under it (1-based ceil(q n)), at least 1.
  const std::size_t rank = std::max<std::size_t>(
      1, static_cast<std::size_t>(std::ceil(clamped * static_cast<double>(sorted_.size()))));
  return sorted_[std::min(rank, sorted_.size()) - 1];
}

}  // namespace tandem::routing
