#include "tandem/serving/engine_loop.h"

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "loop_test_util.h"
#include "counting_model.h"
#include "gtest/gtest.h"
#include "tandem/kernels/backend.h"

namespace tandem::serving {
namespace {

using std::chrono::seconds;

using testing::Collector;
using testing::Greedy;

class EngineLoopTest : public ::testing::Test {
 protected:
  std::unique_ptr<EngineLoop> MakeLoop(int max_in_flight = 16) {
    engine::EngineConfig cfg;
    cfg.block_size = 4;
    cfg.num_blocks = 256;
    auto engine = engine::Engine::Create(&model_, backend_.get(), cfg);
    EXPECT_TRUE(engine.ok()) << engine.status();
    return std::make_unique<EngineLoop>(std::move(*engine), EngineLoopOptions{max_in_flight});
  }

  // 1 ms per step: a 200-token request runs long enough to be cancelled or shut down mid-way.
  testing::CountingModel model_{64, 256, std::chrono::milliseconds(1)};
  std::unique_ptr<kernels::Backend> backend_ = kernels::CreateCpuBackend({1});
};

TEST_F(EngineLoopTest, StreamsEveryRequestsTokensToItsOwnSink) {
  Collector a, b;  // declared first: sinks must outlive the loop that calls them
  auto loop = MakeLoop();
  ASSERT_TRUE(loop->Submit("a", {5, 6}, Greedy(4), a.sink()).ok());
  ASSERT_TRUE(loop->Submit("b", {20}, Greedy(3), b.sink()).ok());
  ASSERT_TRUE(a.WaitFinished());
  ASSERT_TRUE(b.WaitFinished());
  EXPECT_EQ(a.tokens(), (std::vector<std::int32_t>{7, 8, 9, 10}));
  EXPECT_EQ(b.tokens(), (std::vector<std::int32_t>{21, 22, 23}));
  EXPECT_EQ(a.last().finish_reason, engine::FinishReason::kLength);
  EXPECT_EQ(a.last().prompt_tokens, 2);
  EXPECT_EQ(a.last().completion_tokens, 4);
  EXPECT_EQ(loop->load().in_flight, 0);
}

TEST_F(EngineLoopTest, EngineValidationErrorsComeBackSynchronouslyAndLeaveNoState) {
  Collector c, ok;
  auto loop = MakeLoop();
  EXPECT_EQ(loop->Submit("bad", {}, Greedy(4), c.sink()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(loop->Submit("bad", {9999}, Greedy(4), c.sink()).code(),
            absl::StatusCode::kInvalidArgument);
  // The id is free again: nothing was left behind.
  EXPECT_TRUE(loop->Submit("bad", {1}, Greedy(1), ok.sink()).ok());
  EXPECT_TRUE(ok.WaitFinished());
}

TEST_F(EngineLoopTest, CancelEndsTheStreamAsCancelled) {
  Collector c;
  auto loop = MakeLoop();
  ASSERT_TRUE(loop->Submit("long", {1}, Greedy(200), c.sink()).ok());
  ASSERT_TRUE(c.WaitTokens(2));
  loop->Cancel("long");
  ASSERT_TRUE(c.WaitFinished());
  EXPECT_EQ(c.last().finish_reason, engine::FinishReason::kCancelled);
  EXPECT_LT(c.tokens().size(), 200u);
  loop->Cancel("long");  // idempotent, and unknown ids are fine
  loop->Cancel("never-existed");
}

TEST_F(EngineLoopTest, FullQueueAnswersResourceExhausted) {
  Collector a, b, c;
  auto loop = MakeLoop(/*max_in_flight=*/2);
  ASSERT_TRUE(loop->Submit("a", {1}, Greedy(200), a.sink()).ok());
  ASSERT_TRUE(loop->Submit("b", {1}, Greedy(200), b.sink()).ok());
  EXPECT_EQ(loop->Submit("c", {1}, Greedy(1), c.sink()).code(),
            absl::StatusCode::kResourceExhausted);
}

// A KV handoff reserves its request's place before the prefill runs: what arrives later with the
// reservation is never refused for capacity, and nobody else can take the place meanwhile.
TEST_F(EngineLoopTest, AReservedPlaceIsKeptForItsRequestAndCountsAgainstTheLimit) {
  Collector a, b, late;
  auto loop = MakeLoop(/*max_in_flight=*/2);
  const auto nothing = [](engine::Engine&) { return absl::OkStatus(); };
  ASSERT_TRUE(loop->ReservePlace(nothing).ok());
  ASSERT_TRUE(loop->Submit("a", {1}, Greedy(200), a.sink()).ok());
  // One admitted and one reserved: the limit is reached for newcomers and for reservations.
  EXPECT_EQ(loop->Submit("b", {1}, Greedy(1), b.sink()).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(loop->ReservePlace(nothing).code(), absl::StatusCode::kResourceExhausted);
  // The request the place was kept for gets in although the loop is full.
  ASSERT_TRUE(loop
                  ->SubmitWith(
                      "late", late.sink(),
                      [&](engine::Engine& e) {
                        const std::vector<std::int32_t> prompt = {2};
                        return e.AddRequest("late", prompt, Greedy(3));
                      },
                      /*uses_reserved_place=*/true)
                  .ok());
  ASSERT_TRUE(late.WaitFinished());
  EXPECT_EQ(late.tokens().size(), 3u);
  loop->Cancel("a");
  ASSERT_TRUE(a.WaitFinished());
  EXPECT_TRUE(loop->Submit("b", {1}, Greedy(1), b.sink()).ok());
}

TEST_F(EngineLoopTest, AReleasedOrFailedReservationGivesItsPlaceBack) {
  Collector a, b;
  auto loop = MakeLoop(/*max_in_flight=*/1);
  // A reservation whose own work fails takes no place.
  EXPECT_EQ(loop->ReservePlace([](engine::Engine&) { return absl::ResourceExhaustedError("no KV"); })
                .code(),
            absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(loop->ReservePlace([](engine::Engine&) { return absl::OkStatus(); }).ok());
  EXPECT_EQ(loop->Submit("a", {1}, Greedy(1), a.sink()).code(),
            absl::StatusCode::kResourceExhausted);
  loop->ReleasePlace();  // the handoff expired
  ASSERT_TRUE(loop->Submit("a", {1}, Greedy(1), a.sink()).ok());
  ASSERT_TRUE(a.WaitFinished());
  EXPECT_EQ(loop->load().in_flight, 0);
}

TEST_F(EngineLoopTest, ShutdownFinishesInFlightRequestsAsCancelled) {
  Collector c;
  {
    auto loop = MakeLoop();
    ASSERT_TRUE(loop->Submit("x", {1}, Greedy(200), c.sink()).ok());
  }
  ASSERT_TRUE(c.WaitFinished(seconds(1)));
  EXPECT_NE(c.last().finish_reason, engine::FinishReason::kNone);
}

}  // namespace
}  // namespace tandem::serving
