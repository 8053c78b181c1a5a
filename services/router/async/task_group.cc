#include "async/task_group.h"

#include "absl/time/time.h"

namespace tandem::router::async {

Task<void> TaskGroup::Tracked(Task<void> task) {
  co_await std::move(task);
  absl::MutexLock lock(&mu_);
  --running_;
}

void TaskGroup::Spawn(Task<void> task) {
  {
    absl::MutexLock lock(&mu_);
    ++running_;
  }
  // std::function needs a copyable callable: the task travels in a shared holder.
  auto holder = std::make_shared<Task<void>>(Tracked(std::move(task)));
  executor_->Post([holder] { async::Spawn(std::move(*holder)); });
}

bool TaskGroup::Wait(std::chrono::milliseconds timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_ == 0; };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), absl::FromChrono(timeout));
}

int TaskGroup::running() const {
  absl::MutexLock lock(&mu_);
  return running_;
}

}  // namespace tandem::router::async
