#include <memory>
#include <vector>

#include "dispatch/dispatcher.h"
#include "fake_worker.h"
#include "async/event.h"
#include "gtest/gtest.h"
#include "workers/worker_selector.h"

namespace tandem::router {
namespace {

using testing::FakeWorker;
using testing::Ids;

class CollectingSink final : public TokenSink {
 public:
  explicit CollectingSink(size_t stop_after = SIZE_MAX) : stop_after_(stop_after) {}
  bool OnTokens(std::span<const std::int32_t> ids) override {
    batches.emplace_back(ids.begin(), ids.end());
    for (std::int32_t id : ids) tokens.push_back(id);
    return tokens.size() < stop_after_;
  }
  std::vector<std::vector<std::int32_t>> batches;
  std::vector<std::int32_t> tokens;

 private:
  size_t stop_after_;
};

// The dispatcher against real gRPC fake workers, without HTTP.
class DispatcherTest : public ::testing::Test {
 protected:
  FakeWorker* Add(const std::string& id, v1::WorkerRole role, testing::WorkerScript script) {
    workers_.push_back(std::make_unique<FakeWorker>(id, role, std::move(script)));
    v1::RegisterWorkerRequest request;
    *request.mutable_worker() = workers_.back()->Info();
    EXPECT_TRUE(registry_.Register(request).ok());
    return workers_.back().get();
  }

  GenerationRequest Request(int max_tokens) {
    GenerationRequest r;
    r.request_id = "req-1";
    r.prompt_ids = {1, 10, 11};
    r.sampling.set_max_tokens(max_tokens);
    r.deadline = std::chrono::system_clock::now() + std::chrono::seconds(10);
    return r;
  }

  async::Executor executor_{2};
  WorkerRegistry registry_{WorkerRegistry::Options{}};
  LeastLoadedSelector selector_{&registry_};
  Dispatcher dispatcher_{&registry_, Dispatcher::Options{.executor = &executor_}};
  std::vector<std::unique_ptr<FakeWorker>> workers_;
};

TEST_F(DispatcherTest, DisaggregatedTokensArriveFirstTokenFirstWithPrefillsCachedCount) {
  Add("p", v1::WORKER_ROLE_PREFILL, {.first_token = 50, .cached_prompt_tokens = 2});
  FakeWorker* d = Add("d", v1::WORKER_ROLE_DECODE, {.tokens = {51, 52, 53, 54}});
  auto plan = selector_.Select("fake-model", {});
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE(plan->disaggregated());
  CallCanceller canceller;
  CollectingSink sink;
  auto outcome = async::BlockOn(&executor_, dispatcher_.Run(Request(3), *plan, &canceller, &sink));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(sink.tokens, (std::vector<std::int32_t>{50, 51, 52}));
  EXPECT_EQ(sink.batches.front(), std::vector<std::int32_t>{50}) << "TTFT: the first token alone";
  EXPECT_EQ(outcome->finish_reason, v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(outcome->usage.completion_tokens(), 3u);
  EXPECT_EQ(outcome->usage.cached_prompt_tokens(), 2u);
  EXPECT_EQ(d->last_generate().handoff_id(), "handoff-req-1");
}

TEST_F(DispatcherTest, ASinkThatStopsEndsTheGenerationAsStop) {
  FakeWorker* w = Add("c", v1::WORKER_ROLE_COMBINED,
                      {.tokens = {60, 61, 62, 63, 64}, .hang_after = 3});
  auto plan = selector_.Select("fake-model", {});
  ASSERT_TRUE(plan.ok());
  CallCanceller canceller;
  CollectingSink sink(/*stop_after=*/2);
  auto outcome = async::BlockOn(&executor_, dispatcher_.Run(Request(5), *plan, &canceller, &sink));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(sink.tokens, (std::vector<std::int32_t>{60, 61}));
  EXPECT_EQ(outcome->finish_reason, v1::FINISH_REASON_STOP);
  EXPECT_EQ(outcome->usage.completion_tokens(), 2u);
  EXPECT_TRUE(registry_.IsUp("c"));
  EXPECT_FALSE(canceller.cancelled());
  EXPECT_EQ(w->calls().size(), 1u);
}

TEST_F(DispatcherTest, CancellingFailsTheRunWithTheReasonAndTellsTheWorker) {
  FakeWorker* w = Add("c", v1::WORKER_ROLE_COMBINED, {.tokens = {60, 61, 62}, .hang_after = 1});
  auto plan = selector_.Select("fake-model", {});
  ASSERT_TRUE(plan.ok());
  CallCanceller canceller;
  CollectingSink sink;
  std::thread client([&] {
    ASSERT_TRUE(w->WaitForCall("Generate", std::chrono::milliseconds(5000)));
    canceller.Cancel(absl::CancelledError("client left"));
  });
  auto outcome = async::BlockOn(&executor_, dispatcher_.Run(Request(3), *plan, &canceller, &sink));
  client.join();
  EXPECT_EQ(outcome.status(), absl::CancelledError("client left"));
  EXPECT_TRUE(w->WaitForCall("Cancel req-1", std::chrono::milliseconds(5000)));
}

TEST_F(DispatcherTest, ResourceExhaustedPassesThroughWithoutMarkingDown) {
  Add("c", v1::WORKER_ROLE_COMBINED, {.generate_status = grpc::StatusCode::RESOURCE_EXHAUSTED});
  auto plan = selector_.Select("fake-model", {});
  ASSERT_TRUE(plan.ok());
  CallCanceller canceller;
  CollectingSink sink;
  auto outcome = async::BlockOn(&executor_, dispatcher_.Run(Request(3), *plan, &canceller, &sink));
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(registry_.IsUp("c"));
}

}  // namespace
}  // namespace tandem::router
