#include "async/executor.h"

#include <algorithm>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tandem::router::async {

Executor::Executor(int threads) {
  threads_.reserve(static_cast<std::size_t>(std::max(1, threads)));
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { Loop(); });
}

Executor::~Executor() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void Executor::Post(std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  ready_.push_back(std::move(work));
}

Executor::TimerId Executor::PostAt(Clock::time_point when, std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  const TimerId id = next_timer_++;
  if (stopping_) return id;
  timers_.emplace(std::make_pair(when, id), std::move(work));
  timer_due_.emplace(id, when);
  return id;
}

bool Executor::Cancel(TimerId id) {
  absl::MutexLock lock(&mu_);
  auto due = timer_due_.find(id);
  if (due == timer_due_.end()) return false;
  timers_.erase(std::make_pair(due->second, id));
  timer_due_.erase(due);
  return true;
}

void Executor::Loop() {
  for (;;) {
    std::function<void()> work;
    {
      absl::MutexLock lock(&mu_);
      for (;;) {
        if (stopping_) return;
        if (!timers_.empty() && timers_.begin()->first.first <= Clock::now()) {
          auto first = timers_.begin();
          work = std::move(first->second);
          timer_due_.erase(first->first.second);
          timers_.erase(first);
          break;
        }
        if (!ready_.empty()) {
          work = std::move(ready_.front());
          ready_.pop_front();
          break;
        }
        // Also wake when a timer is set earlier than the one this wait is timed for.
        const Clock::time_point timed_for =
            timers_.empty() ? Clock::time_point::max() : timers_.begin()->first.first;
        auto has_work = [this, timed_for]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || !ready_.empty() ||
                 (!timers_.empty() && timers_.begin()->first.first < timed_for);
        };
        if (timers_.empty()) {
          mu_.Await(absl::Condition(&has_work));
        } else {
          mu_.AwaitWithTimeout(absl::Condition(&has_work),
                               absl::FromChrono(timed_for - Clock::now()));
        }
      }
    }
    work();
  }
}

}  // namespace tandem::router::async
