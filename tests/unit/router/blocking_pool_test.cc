// The pool that keeps blocking image fetches off the HTTP I/O threads: at most `threads` tasks
// run at once, at most `max_queued` wait, the rest are refused at once, and what was queued runs
// before the pool is gone.
#include "api/http/blocking_pool.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace tandem::router {
namespace {

TEST(BlockingPoolTest, RunsAtMostItsThreadsAtOnceQueuesABoundedNumberAndRefusesTheRest) {
  absl::Notification release;
  std::atomic<int> running{0}, most{0}, ran{0};
  {
    BlockingPool pool(/*threads=*/2, /*max_queued=*/3);
    const auto task = [&] {
      const int now = ++running;
      int seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      release.WaitForNotification();
      --running;
      ++ran;
    };
    ASSERT_TRUE(pool.TrySubmit(task));
    ASSERT_TRUE(pool.TrySubmit(task));
    // Both threads are busy once both tasks started; then 3 more may wait and no more.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (running.load() < 2) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline);
      std::this_thread::yield();
    }
    EXPECT_TRUE(pool.TrySubmit(task));
    EXPECT_TRUE(pool.TrySubmit(task));
    EXPECT_TRUE(pool.TrySubmit(task));
    EXPECT_FALSE(pool.TrySubmit(task)) << "a fourth waiting task must be refused";
    release.Notify();
  }  // the destructor runs what was queued, then joins
  EXPECT_EQ(ran.load(), 5);
  EXPECT_EQ(most.load(), 2);
}

}  // namespace
}  // namespace tandem::router
