#pragma once

#include <chrono>
#include <coroutine>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "async/executor.h"
#include "async/task.h"

namespace tandem::router::async {

// Wakes one waiting coroutine: `co_await event->Wait()` suspends until Notify (a Notify that
// came first is kept, so none is lost). The waiter resumes on the executor, never inside Notify,
// so notifiers may hold their own locks. After waking, the waiter re-checks whatever it waits
// for: several sources (a grant, a cancellation, a timer) may notify the same event.
// Thread-safe; share it with the notifiers through the shared_ptr.
class Event {
 public:
  static std::shared_ptr<Event> Create(Executor* executor) {
    return std::shared_ptr<Event>(new Event(executor));
  }

  void Notify();

  class Awaiter {
   public:
    explicit Awaiter(Event* event) : event_(event) {}
    bool await_ready() { return event_->TakePending(); }
    bool await_suspend(std::coroutine_handle<> waiter) { return event_->Park(waiter); }
    void await_resume() {}

   private:
    Event* event_;
  };
  Awaiter Wait() { return Awaiter(this); }

  Executor* executor() const { return executor_; }

 private:
  explicit Event(Executor* executor) : executor_(executor) {}
  bool TakePending();
  // False (resume at once) when a notification came meanwhile.
  bool Park(std::coroutine_handle<> waiter);

  Executor* const executor_;
  absl::Mutex mu_;
  bool pending_ ABSL_GUARDED_BY(mu_) = false;
  std::coroutine_handle<> waiter_ ABSL_GUARDED_BY(mu_);
};

// Notifies `event` at `when` unless destroyed first.
class Alarm {
 public:
  Alarm(std::shared_ptr<Event> event, Executor::Clock::time_point when);
  Alarm(std::shared_ptr<Event> event, std::chrono::system_clock::time_point when);
  ~Alarm();
  Alarm(const Alarm&) = delete;
  Alarm& operator=(const Alarm&) = delete;

 private:
  Executor* executor_;
  Executor::TimerId id_;
};

Task<void> Sleep(Executor* executor, std::chrono::milliseconds duration);

// Runs `task` on the executor and blocks until it ends: for tests and for blocking callers at the
// edges; never from the executor's own threads.
template <typename T>
T BlockOn(Executor* executor, Task<T> task);

}  // namespace tandem::router::async

#include "async/block_on.inc"
