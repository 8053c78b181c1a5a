// The router's event loop on its own: timers in order and cancellable, events that lose no
// notification, tasks that chain and a group that knows when its tasks ended.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "async/event.h"
#include "async/executor.h"
#include "async/task.h"
#include "async/task_group.h"
#include "gtest/gtest.h"

namespace tandem::router::async {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

TEST(ExecutorTest, TimersRunInDueOrderAndACancelledOneNever) {
  Executor executor(2);
  absl::Mutex mu;
  std::vector<int> order;
  absl::Notification last;
  const auto now = Clock::now();
  auto record = [&](int id) {
    absl::MutexLock lock(&mu);
    order.push_back(id);
  };
  executor.PostAt(now + milliseconds(60), [&] {
    record(3);
    last.Notify();
  });
  executor.PostAt(now + milliseconds(20), [&] { record(1); });
  const Executor::TimerId cancelled = executor.PostAt(now + milliseconds(40), [&] { record(9); });
  executor.PostAt(now + milliseconds(40) + milliseconds(1), [&] { record(2); });
  EXPECT_TRUE(executor.Cancel(cancelled));
  EXPECT_FALSE(executor.Cancel(cancelled)) << "cancelling twice";
  ASSERT_TRUE(last.WaitForNotificationWithTimeout(absl::Seconds(5)));
  absl::MutexLock lock(&mu);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

// A thread asleep until a far timer must wake for an earlier one set later.
TEST(ExecutorTest, AnEarlierTimerSetLaterIsNotDelayedByAFarOne) {
  Executor executor(1);
  executor.PostAt(Clock::now() + std::chrono::hours(1), [] {});
  std::this_thread::sleep_for(milliseconds(20));  // the loop now sleeps for the far timer
  absl::Notification ran;
  const auto set = Clock::now();
  executor.PostAt(set + milliseconds(10), [&] { ran.Notify(); });
  ASSERT_TRUE(ran.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_LT(Clock::now() - set, std::chrono::seconds(2));
}

Task<int> Add(Executor* executor, int a, int b) {
  co_await Sleep(executor, milliseconds(1));
  co_return a + b;
}

Task<int> Chain(Executor* executor) {
  int total = 0;
  for (int i = 0; i < 100; ++i) total += co_await Add(executor, i, 1);
  co_return total;
}

TEST(TaskTest, AwaitedTasksChainAndReturnTheirValues) {
  Executor executor(2);
  EXPECT_EQ(BlockOn(&executor, Chain(&executor)), 5050);
}

Task<int> WaitFor(std::shared_ptr<Event> event, std::atomic<int>* woke) {
  co_await event->Wait();
  ++*woke;
  co_return 1;
}

TEST(EventTest, ANotificationBeforeTheWaitIsKept) {
  Executor executor(2);
  auto event = Event::Create(&executor);
  event->Notify();
  std::atomic<int> woke{0};
  EXPECT_EQ(BlockOn(&executor, WaitFor(event, &woke)), 1);
  EXPECT_EQ(woke.load(), 1);
}

TEST(EventTest, ManyNotifiersRacingAWaiterNeverLoseIt) {
  Executor executor(2);
  for (int round = 0; round < 200; ++round) {
    auto event = Event::Create(&executor);
    std::atomic<int> woke{0};
    std::thread notifier([&] { event->Notify(); });
    EXPECT_EQ(BlockOn(&executor, WaitFor(event, &woke)), 1);
    notifier.join();
  }
}

TEST(EventTest, AnAlarmWakesAndADestroyedOneDoesNot) {
  Executor executor(2);
  auto event = Event::Create(&executor);
  { Alarm gone(event, Clock::now() + milliseconds(10)); }
  std::this_thread::sleep_for(milliseconds(50));
  Alarm alarm(event, Clock::now() + milliseconds(30));
  std::atomic<int> woke{0};
  const auto start = Clock::now();
  EXPECT_EQ(BlockOn(&executor, WaitFor(event, &woke)), 1);
  EXPECT_GE(Clock::now() - start, milliseconds(25)) << "the destroyed alarm woke it early";
}

Task<void> Bump(Executor* executor, std::atomic<int>* done) {
  co_await Sleep(executor, milliseconds(5));
  ++*done;
}

TEST(TaskGroupTest, WaitReturnsOnceEverySpawnedTaskEnded) {
  Executor executor(2);
  TaskGroup group(&executor);
  std::atomic<int> done{0};
  for (int i = 0; i < 50; ++i) group.Spawn(Bump(&executor, &done));
  ASSERT_TRUE(group.Wait(std::chrono::seconds(5)));
  EXPECT_EQ(done.load(), 50);
  EXPECT_EQ(group.running(), 0);
}

TEST(TaskGroupTest, WaitTimesOutWhileATaskStillWaits) {
  Executor executor(2);
  TaskGroup group(&executor);
  auto event = Event::Create(&executor);
  std::atomic<int> woke{0};
  group.Spawn([](std::shared_ptr<Event> e, std::atomic<int>* w) -> Task<void> {
    co_await WaitFor(e, w);
  }(event, &woke));
  EXPECT_FALSE(group.Wait(milliseconds(50)));
  EXPECT_EQ(group.running(), 1);
  event->Notify();
  EXPECT_TRUE(group.Wait(std::chrono::seconds(5)));
  EXPECT_EQ(woke.load(), 1);
}

}  // namespace
}  // namespace tandem::router::async
