// The router's admission queue on its own, with a fake clock: places, arrival order, refusals only
// when waiting is unreasonable, and the limit that follows what the workers hold.
#include "admission/admission.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "async/event.h"
#include "gtest/gtest.h"

namespace tandem::router {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

class AdmissionTest : public ::testing::Test {
 protected:
  void Make(int max_in_flight, int max_queue_length = 100,
            milliseconds max_queue_wait = milliseconds(30000)) {
    admission_ = std::make_unique<Admission>(
        AdmissionOptions{.max_in_flight = max_in_flight,
                         .max_queue_length = max_queue_length,
                         .max_queue_wait = max_queue_wait,
                         .now = [this] { return now_.load(); }},
        nullptr, &executor_);
  }
  std::unique_ptr<AdmissionTicket> Admit(absl::Status* refused = nullptr) {
    absl::Status ignored;
    return admission_->Admit(std::make_shared<CallCanceller>(), refused ? refused : &ignored);
  }
  static std::chrono::system_clock::time_point Soon() {
    return std::chrono::system_clock::now() + std::chrono::seconds(10);
  }
  // Waits (real time, bounded) until `pred` holds.
  template <typename Pred>
  static bool Eventually(Pred pred) {
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (!pred()) {
      if (Clock::now() > deadline) return false;
      std::this_thread::sleep_for(milliseconds(1));
    }
    return true;
  }

  std::atomic<Clock::time_point> now_{Clock::time_point{} + std::chrono::hours(1)};
  async::Executor executor_{2};
  std::unique_ptr<Admission> admission_;
};

TEST_F(AdmissionTest, UpToTheLimitRunAtOnceTheRestQueueAndStartInArrivalOrder) {
  Make(/*max_in_flight=*/2);
  auto a = Admit(), b = Admit(), c = Admit(), d = Admit();
  ASSERT_TRUE(a && b && c && d);
  EXPECT_EQ(admission_->running(), 2);
  EXPECT_EQ(admission_->queued(), 2);
  EXPECT_TRUE(async::BlockOn(&executor_, a->Turn(Soon())).ok());  // running already: returns at once

  std::atomic<int> order{0}, c_turn{0}, d_turn{0};
  std::thread tc([&] { if (async::BlockOn(&executor_, c->Turn(Soon())).ok()) c_turn = ++order; });
  std::thread td([&] { if (async::BlockOn(&executor_, d->Turn(Soon())).ok()) d_turn = ++order; });
  a.reset();  // one place frees: the earlier arrival gets it
  ASSERT_TRUE(Eventually([&] { return c_turn.load() != 0; }));
  EXPECT_EQ(d_turn.load(), 0);
  b.reset();
  tc.join();
  td.join();
  EXPECT_EQ(c_turn.load(), 1);
  EXPECT_EQ(d_turn.load(), 2);
  EXPECT_EQ(admission_->queued(), 0);
}

TEST_F(AdmissionTest, AFullQueueRefusesWithRetryAfterAndLeavesNothing) {
  Make(/*max_in_flight=*/1, /*max_queue_length=*/1);
  auto a = Admit(), b = Admit();
  ASSERT_TRUE(a && b);
  absl::Status refused;
  EXPECT_EQ(Admit(&refused), nullptr);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_GE(RetryAfterSeconds(refused), 1);
  EXPECT_EQ(admission_->active(), 2);
}

TEST_F(AdmissionTest, RefusesWhenThePredictedWaitExceedsTheBound) {
  Make(/*max_in_flight=*/1, /*max_queue_length=*/100, milliseconds(2600));
  // Generations that hold their place one second each make the queue's pace known.
  for (int i = 0; i < 20; ++i) {
    auto t = Admit();
    now_ = now_.load() + std::chrono::seconds(1);
  }
  EXPECT_EQ(admission_->PredictedWait(), milliseconds(1000));
  auto running = Admit();
  auto first = Admit();   // one place at a time, 1 s each: 1 s
  auto second = Admit();  // 2 s: within the bound
  ASSERT_TRUE(running && first && second);
  absl::Status refused;
  EXPECT_EQ(Admit(&refused), nullptr);  // 3 s: refused
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(RetryAfterSeconds(refused), 3);
  EXPECT_EQ(admission_->PredictedWait(), milliseconds(3000));
}

TEST_F(AdmissionTest, ABurstsFirstCompletionsDoNotRefuseAnyone) {
  Make(/*max_in_flight=*/2, /*max_queue_length=*/1000, milliseconds(1000));
  std::vector<std::unique_ptr<AdmissionTicket>> burst;
  for (int i = 0; i < 500; ++i) burst.push_back(Admit());
  // Two quick ones finish 10 s in: too few to predict from, so the queue keeps taking requests.
  now_ = now_.load() + std::chrono::seconds(10);
  burst[0].reset();
  burst[1].reset();
  EXPECT_EQ(admission_->PredictedWait(), milliseconds(0));
  EXPECT_NE(Admit(), nullptr);
}

TEST_F(AdmissionTest, WithoutHistoryTheWaitIsUnknownAndOnlyTheLengthBounds) {
  Make(/*max_in_flight=*/1, /*max_queue_length=*/50, milliseconds(1));
  auto running = Admit();
  std::vector<std::unique_ptr<AdmissionTicket>> queued;
  for (int i = 0; i < 50; ++i) queued.push_back(Admit());
  for (const auto& t : queued) EXPECT_NE(t, nullptr);
  EXPECT_EQ(Admit(), nullptr);
}

TEST_F(AdmissionTest, AWorkerRefusalLowersTheLimitAndTheRefusedGoesFirst) {
  Make(/*max_in_flight=*/4);
  auto a = Admit(), b = Admit(), c = Admit(), refused = Admit(), late = Admit();
  EXPECT_EQ(admission_->running(), 4);
  EXPECT_EQ(admission_->queued(), 1);
  std::atomic<bool> retried{false}, late_started{false};
  std::thread retry([&] { retried = async::BlockOn(&executor_, refused->Requeue(Soon())).ok(); });
  std::thread waiter([&] { late_started = async::BlockOn(&executor_, late->Turn(Soon())).ok(); });
  // The workers hold 3: the limit follows, and neither waiting generation starts yet.
  ASSERT_TRUE(Eventually([&] { return admission_->queued() == 2; }));
  EXPECT_EQ(admission_->limit(), 3);
  EXPECT_FALSE(retried.load());
  a.reset();  // a completion: the refused one, though it arrived after `late` queued, goes first
  ASSERT_TRUE(Eventually([&] { return retried.load(); }));
  EXPECT_FALSE(late_started.load());
  b.reset();
  retry.join();
  waiter.join();
  EXPECT_TRUE(late_started.load());
}

TEST_F(AdmissionTest, RefusedRetriesGiveUpAfterTheQueueBound) {
  Make(/*max_in_flight=*/2, 100, milliseconds(300));
  auto holder = Admit(), refused = Admit();
  std::atomic<bool> done{false};
  absl::Status result;
  std::thread retry([&] {
    result = async::BlockOn(&executor_, refused->Requeue(Soon()));
    done = true;
  });
  ASSERT_TRUE(Eventually([&] { return admission_->queued() == 1; }));
  now_ = now_.load() + milliseconds(301);
  retry.join();
  EXPECT_EQ(result.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(admission_->queued(), 0);
}

TEST_F(AdmissionTest, CancellingAQueuedGenerationTakesItOutOfTheQueue) {
  Make(/*max_in_flight=*/1);
  auto holder = Admit();
  auto canceller = std::make_shared<CallCanceller>();
  absl::Status ignored;
  auto queued = admission_->Admit(canceller, &ignored);
  absl::Status result;
  std::thread waiter([&] { result = async::BlockOn(&executor_, queued->Turn(Soon())); });
  canceller->Cancel(absl::CancelledError("client went away"));
  waiter.join();
  EXPECT_EQ(result.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(admission_->queued(), 0);
  queued.reset();
  holder.reset();
  EXPECT_EQ(admission_->active(), 0);
}

TEST_F(AdmissionTest, CloseCancelsQueuedAndRunningAndRefusesNewcomers) {
  Make(/*max_in_flight=*/1);
  auto running = Admit(), queued = Admit();
  absl::Status result;
  std::thread waiter([&] { result = async::BlockOn(&executor_, queued->Turn(Soon())); });
  admission_->CloseAndCancelAll(absl::UnavailableError("shutting down"));
  waiter.join();
  EXPECT_EQ(result.code(), absl::StatusCode::kUnavailable);
  absl::Status refused;
  EXPECT_EQ(Admit(&refused), nullptr);
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tandem::router
