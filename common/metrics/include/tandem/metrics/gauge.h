#pragma once

#include <atomic>

namespace tandem::metrics {

// A value that goes up and down (queue depth, KV blocks in use). Lock-free; safe to share.
class Gauge {
 public:
  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double delta) { value_.fetch_add(delta, std::memory_order_relaxed); }
  void Increment() { Add(1.0); }
  void Decrement() { Add(-1.0); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

}  // namespace tandem::metrics
