#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/scratch_pool.h"

namespace tandem::kernels::cpu {

// A persistent pool owned by one backend instance: size() - 1 worker threads plus the calling
// thread. Run() hands out task indices dynamically, so which thread computes a task varies from
// call to call; kernels therefore make each task's result depend only on its index.
class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);  // <= 0: hardware concurrency
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // The kernels' large work buffers, kept between calls (scratch_pool.h).
  ScratchPool& scratch() { return scratch_; }

  // Calls fn(task, worker) for every task in [0, num_tasks), worker in [0, size()) naming the
  // thread (for per-thread scratch). Returns when all tasks are done. Concurrent callers are
  // serialised; a task must not call Run on its own pool (it would wait on itself).
  template <typename Fn>
  void Run(int num_tasks, Fn&& fn) {
    if (num_tasks <= 0) return;
    if (num_tasks == 1 || workers_.empty()) {
      for (int t = 0; t < num_tasks; ++t) fn(t, 0);
      return;
    }
    RunJob(num_tasks, &Trampoline<std::remove_reference_t<Fn>>, &fn);
  }

 private:
  using TaskFn = void (*)(void* ctx, int task, int worker);
  template <typename Fn>
  static void Trampoline(void* ctx, int task, int worker) {
    (*static_cast<Fn*>(ctx))(task, worker);
  }

  void RunJob(int num_tasks, TaskFn fn, void* ctx);
  void WorkerLoop(int worker);
  void Drain(int worker);

  std::mutex dispatch_mu_;  // one job in flight at a time
  std::mutex mu_;           // guards everything below except workers_
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  std::uint64_t generation_ = 0;
  // generation_, readable without mu_: a worker that just finished a job polls it for a short
  // while before sleeping on start_cv_, so the next job (a forward pass is hundreds of calls a
  // few microseconds apart) does not wait for the kernel to wake it.
  std::atomic<std::uint64_t> published_generation_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<int> tasks_remaining_{0};  // of the current job, readable without mu_
  int tasks_done_ = 0;
  bool stop_ = false;
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int num_tasks_ = 0;
  int next_task_ = 0;  // tasks are coarse, so taking the lock per task is cheap enough
  std::vector<std::thread> workers_;
  ScratchPool scratch_;
};

}  // namespace tandem::kernels::cpu
