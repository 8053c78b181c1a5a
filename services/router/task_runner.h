#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tandem::router {

// One thread per task (a generation blocks on synchronous gRPC calls), all tracked so shutdown
// can join them. Finished threads are joined as new tasks start.
class TaskRunner {
 public:
  TaskRunner() = default;
  ~TaskRunner();  // joins everything
  TaskRunner(const TaskRunner&) = delete;
  TaskRunner& operator=(const TaskRunner&) = delete;

  void Spawn(std::function<void()> task);
  // Waits for every task, running or started meanwhile.
  void JoinAll();
  int running() const;

 private:
  void ReapFinished() ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  std::uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::uint64_t, std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::vector<std::uint64_t> finished_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::router
