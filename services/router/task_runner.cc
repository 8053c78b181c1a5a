#include "task_runner.h"

namespace tandem::router {

TaskRunner::~TaskRunner() { JoinAll(); }

void TaskRunner::Spawn(std::function<void()> task) {
  ReapFinished();
  absl::MutexLock lock(&mu_);
  const std::uint64_t id = next_id_++;
  threads_.emplace(id, std::thread([this, id, task = std::move(task)] {
                     task();
                     absl::MutexLock done(&mu_);
                     finished_.push_back(id);
                   }));
}

void TaskRunner::ReapFinished() {
  std::vector<std::thread> done;
  {
    absl::MutexLock lock(&mu_);
    for (std::uint64_t id : finished_) {
      auto it = threads_.find(id);
      if (it == threads_.end()) continue;  // JoinAll took it
      done.push_back(std::move(it->second));
      threads_.erase(it);
    }
    finished_.clear();
  }
  for (std::thread& t : done) t.join();  // they have returned already, or are about to
}

void TaskRunner::JoinAll() {
  for (;;) {
    std::map<std::uint64_t, std::thread> all;
    {
      absl::MutexLock lock(&mu_);
      if (threads_.empty()) return;
      all.swap(threads_);
      finished_.clear();
    }
    for (auto& [id, t] : all) t.join();
  }
}

int TaskRunner::running() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(threads_.size() - finished_.size());
}

}  // namespace tandem::router
