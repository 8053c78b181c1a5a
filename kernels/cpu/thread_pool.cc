#include "thread_pool.h"

namespace tandem::kernels::cpu {

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::thread::hardware_concurrency());
  if (num_threads <= 0) num_threads = 1;
  workers_.reserve(num_threads - 1);
  for (int w = 1; w < num_threads; ++w) workers_.emplace_back([this, w] { WorkerLoop(w); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunJob(int num_tasks, TaskFn fn, void* ctx) {
  std::lock_guard<std::mutex> dispatch(dispatch_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = fn;
    ctx_ = ctx;
    num_tasks_ = num_tasks;
    next_task_ = 0;
    tasks_done_ = 0;
    ++generation_;
  }
  start_cv_.notify_all();
  Drain(0);
  // Wait for the tasks, not the workers: a worker the OS has not scheduled yet finds nothing left
  // when it wakes (the caller took its share), so a busy core never stalls the call.
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return tasks_done_ == num_tasks_; });
}

void ThreadPool::Drain(int worker) {
  std::unique_lock<std::mutex> lock(mu_);
  while (next_task_ < num_tasks_) {
    const int task = next_task_++;
    const TaskFn fn = fn_;
    void* const ctx = ctx_;
    lock.unlock();
    fn(ctx, task, worker);
    lock.lock();
    if (++tasks_done_ == num_tasks_) done_cv_.notify_one();
  }
}

void ThreadPool::WorkerLoop(int worker) {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    Drain(worker);
  }
}

}  // namespace tandem::kernels::cpu
