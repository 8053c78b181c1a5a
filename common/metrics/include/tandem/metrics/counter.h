#pragma once

#include <atomic>

namespace tandem::metrics {

// A monotonically increasing value (requests served, tokens generated). Lock-free; safe to share
// between threads. Obtain one from Family<Counter>::WithLabels and keep the pointer.
class Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  // Negative and NaN deltas are dropped: a counter that goes down would make rate() lie.
  void Increment(double delta = 1.0) {
    if (!(delta >= 0.0)) return;
    value_.fetch_add(delta, std::memory_order_relaxed);
  }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// A counter mirroring a running total kept elsewhere (a component's own monotonic count): each
// scrape adds what accrued since the last one, so the hot path pays nothing for metrics.
struct CounterFromTotal {
  Counter* counter = nullptr;
  double last = 0;
  void Sync(double total) {
    if (total > last) counter->Increment(total - last);
    last = total;
  }
};

}  // namespace tandem::metrics
