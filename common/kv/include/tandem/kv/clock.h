#pragma once

#include <atomic>
#include <cstdint>

namespace tandem::kv {

// Wall-clock source in unix milliseconds (expiry is persisted, so it must be wall time).
// Injected so tests and trace replays control time.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::int64_t NowUnixMs() const = 0;
};

class SystemClock final : public Clock {
 public:
  std::int64_t NowUnixMs() const override;
};

// Moves only when told to; safe to read from the store's threads while a test advances it.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(std::int64_t start_unix_ms) : now_ms_(start_unix_ms) {}
  std::int64_t NowUnixMs() const override { return now_ms_.load(std::memory_order_acquire); }
  void Advance(std::int64_t ms) { now_ms_.fetch_add(ms, std::memory_order_acq_rel); }
  void Set(std::int64_t unix_ms) { now_ms_.store(unix_ms, std::memory_order_release); }

 private:
  std::atomic<std::int64_t> now_ms_;
};

}  // namespace tandem::kv
