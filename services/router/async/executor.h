#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tandem::router::async {

// The router's event loop: a few threads that run posted work and timers. Generations are
// coroutines that suspend on every wait (their turn, a worker's answer, the client's socket), so
// a waiting request costs its state, not a thread. Work must not block. Thread-safe.
class Executor {
 public:
  using Clock = std::chrono::steady_clock;
  using TimerId = std::uint64_t;

  explicit Executor(int threads);
  // Stops: work and timers not yet run are dropped, then the threads are joined.
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  void Post(std::function<void()> work);
  // Runs `work` at `when` (at once if it has passed), unless cancelled first.
  TimerId PostAt(Clock::time_point when, std::function<void()> work);
  // True when the timer had not run yet and now never will.
  bool Cancel(TimerId id);

  int threads() const { return static_cast<int>(threads_.size()); }

 private:
  void Loop();

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::function<void()>> ready_ ABSL_GUARDED_BY(mu_);
  TimerId next_timer_ ABSL_GUARDED_BY(mu_) = 1;
  // Ordered by (when, id): the earliest first, ties in the order they were set.
  std::map<std::pair<Clock::time_point, TimerId>, std::function<void()>> timers_
      ABSL_GUARDED_BY(mu_);
  std::map<TimerId, Clock::time_point> timer_due_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace tandem::router::async
