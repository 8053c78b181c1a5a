#pragma once

#include <chrono>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "async/executor.h"
#include "async/task.h"

namespace tandem::router::async {

// The coroutines a server started and nobody awaits (one per request), counted so that shutdown
// can wait for them to end. Thread-safe.
class TaskGroup {
 public:
  explicit TaskGroup(Executor* executor) : executor_(executor) {}

  // Runs `task` on the executor (never on the caller's thread: callers are I/O threads).
  void Spawn(Task<void> task);
  // Waits until every task ended, up to `timeout`; false if some are still running.
  bool Wait(std::chrono::milliseconds timeout);
  int running() const;

  Executor* executor() const { return executor_; }

 private:
  Task<void> Tracked(Task<void> task);

  Executor* const executor_;
  mutable absl::Mutex mu_;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tandem::router::async
