// The fast backend's thread pool: every task runs exactly once, on a named worker, call after call.
// The pool is internal to the CPU backend (not an installed header), hence the source-relative path.
#include "runtime/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace tandem::kernels::cpu {
namespace {

TEST(ThreadPool, RunsEveryTaskExactlyOnce) {
  for (int threads : {1, 2, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int tasks : {0, 1, 3, 64}) {
      for (int rep = 0; rep < 20; ++rep) {
        std::vector<std::atomic<int>> hits(tasks);
        std::atomic<bool> bad_worker{false};
        pool.Run(tasks, [&](int task, int worker) {
          hits[task].fetch_add(1);
          if (worker < 0 || worker >= pool.size()) bad_worker = true;
        });
        for (int t = 0; t < tasks; ++t) ASSERT_EQ(hits[t].load(), 1) << "task " << t;
        EXPECT_FALSE(bad_worker.load());
      }
    }
  }
}

TEST(ThreadPool, ZeroMeansHardwareConcurrency) {
  ThreadPool pool(0);
  EXPECT_GE(pool.size(), 1);
}

TEST(ThreadPool, WorkersNeverShareAWorkerIndexConcurrently) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> busy(pool.size());
  std::atomic<bool> clash{false};
  pool.Run(300, [&](int, int worker) {
    if (busy[worker].fetch_add(1) != 0) clash = true;
    std::this_thread::sleep_for(std::chrono::microseconds(20));  // widen the overlap window
    busy[worker].fetch_sub(1);
  });
  EXPECT_FALSE(clash.load());
}

}  // namespace
}  // namespace tandem::kernels::cpu
