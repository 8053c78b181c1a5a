#include "async/event.h"

#include <algorithm>
#include <utility>

namespace tandem::router::async {

void Event::Notify() {
  std::coroutine_handle<> waiter;
  {
    absl::MutexLock lock(&mu_);
    waiter = std::exchange(waiter_, {});
    if (!waiter) pending_ = true;
  }
  if (waiter) executor_->Post([waiter] { waiter.resume(); });
}

bool Event::TakePending() {
  absl::MutexLock lock(&mu_);
  return std::exchange(pending_, false);
}

bool Event::Park(std::coroutine_handle<> waiter) {
  absl::MutexLock lock(&mu_);
  if (std::exchange(pending_, false)) return false;
  waiter_ = waiter;
  return true;
}

Alarm::Alarm(std::shared_ptr<Event> event, Executor::Clock::time_point when)
    : executor_(event->executor()) {
  id_ = executor_->PostAt(when, [event = std::move(event)] { event->Notify(); });
}

namespace {

// A far deadline (or none: time_point::max) must not overflow the steady clock's arithmetic.
Executor::Clock::time_point SteadyFor(std::chrono::system_clock::time_point when) {
  const auto left = std::clamp<std::chrono::system_clock::duration>(
      when - std::chrono::system_clock::now(), std::chrono::system_clock::duration::zero(),
      std::chrono::hours(24 * 365));
  return Executor::Clock::now() + std::chrono::duration_cast<Executor::Clock::duration>(left);
}

}  // namespace

Alarm::Alarm(std::shared_ptr<Event> event, std::chrono::system_clock::time_point when)
    : Alarm(std::move(event), SteadyFor(when)) {}

Alarm::~Alarm() { executor_->Cancel(id_); }

Task<void> Sleep(Executor* executor, std::chrono::milliseconds duration) {
  std::shared_ptr<Event> event = Event::Create(executor);
  Alarm alarm(event, Executor::Clock::now() + duration);
  co_await event->Wait();
}

}  // namespace tandem::router::async
