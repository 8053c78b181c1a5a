#include "dispatch/dispatcher.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "async/event.h"
#include "fake_worker.h"
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

  // A generation on `w` (the least loaded combined worker) whose client leaves once it streams.
  absl::Status RunUntilTheClientLeaves(const FakeWorker& w) {
    auto plan = selector_.Select("fake-model", {});
    if (!plan.ok()) return plan.status();
    EXPECT_EQ(plan->combined->worker().id(), w.id());
    CallCanceller canceller;
    CollectingSink sink;
    std::thread client([&] {
      EXPECT_TRUE(w.WaitForCall("Generate", std::chrono::milliseconds(5000)));
      canceller.Cancel(absl::CancelledError("client left"));
    });
    auto outcome =
        async::BlockOn(&executor_, dispatcher_.Run(Request(3), *plan, &canceller, &sink));
    client.join();
    return outcome.status();
  }
  // What the worker's heartbeat does to the registry (a down worker is up again).
  void Heartbeat(const FakeWorker& w) {
    v1::HeartbeatRequest request;
    request.set_worker_id(w.id());
    request.set_incarnation(w.Info().incarnation());
    ASSERT_FALSE(registry_.Heartbeat(request).reregister());
  }
  // The registration of worker `id` (the registry keeps it alive).
  const WorkerEntry& Entry(const std::string& id, v1::WorkerRole role) {
    for (const WorkerView& view : registry_.Healthy("fake-model", role)) {
      if (view.entry->id() == id) return *view.entry;
    }
    ADD_FAILURE() << "no healthy worker " << id;
    std::abort();
  }
  static int Count(const FakeWorker& w, const std::string& call) {
    const std::vector<std::string> calls = w.calls();
    return static_cast<int>(std::count(calls.begin(), calls.end(), call));
  }
  // Waits until `w` was sent `call` `times` times.
  static bool WaitForCount(const FakeWorker& w, const std::string& call, int times) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (Count(w, call) < times) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
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

// A held prefill moved to another prefill worker while it waited (docs/routing.md rule 10): its
// start gate says where, and the dispatcher calls that worker, with that worker's predicted hit.
TEST_F(DispatcherTest, AHeldPrefillMovedWhileItWaitedIsSentToItsNewWorker) {
  FakeWorker* chosen = Add("p1", v1::WORKER_ROLE_PREFILL, {.first_token = 50});
  FakeWorker* idle = Add("p2", v1::WORKER_ROLE_PREFILL, {.first_token = 50});
  Add("d", v1::WORKER_ROLE_DECODE, {.tokens = {51, 52}});
  std::shared_ptr<WorkerEntry> to;
  for (const WorkerView& view : registry_.Healthy("fake-model", v1::WORKER_ROLE_PREFILL)) {
    if (view.entry->id() == idle->id()) to = view.entry;
  }
  ASSERT_NE(to, nullptr);
  WorkerPlan plan;
  for (const WorkerView& view : registry_.Healthy("fake-model", v1::WORKER_ROLE_PREFILL)) {
    if (view.entry->id() == chosen->id()) plan.prefill = registry_.Acquire(view.entry);
  }
  plan.decode = registry_.Acquire(registry_.Healthy("fake-model", v1::WORKER_ROLE_DECODE)[0].entry);
  ASSERT_NE(plan.prefill, nullptr);
  plan.prefill->SetStartGate([to](async::Executor*, CallCanceller*,
                                  std::chrono::system_clock::time_point)
                                 -> async::Task<absl::StatusOr<WorkerLease::Started>> {
    co_return WorkerLease::Started{.moved =
                                       WorkerLease::Moved{.to = to, .predicted_cached_tokens = 0}};
  });
  CallCanceller canceller;
  CollectingSink sink;
  auto outcome = async::BlockOn(&executor_, dispatcher_.Run(Request(3), plan, &canceller, &sink));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(sink.tokens, (std::vector<std::int32_t>{50, 51, 52}));
  EXPECT_EQ(Count(*idle, "Prefill req-1 handoff-req-1"), 1);
  EXPECT_EQ(Count(*chosen, "Prefill req-1 handoff-req-1"), 0);
  EXPECT_TRUE(chosen->calls().empty());
  EXPECT_EQ(plan.prefill->worker().id(), idle->id());
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
  EXPECT_EQ(RunUntilTheClientLeaves(*w), absl::CancelledError("client left"));
  EXPECT_TRUE(w->WaitForCall("Cancel req-1", std::chrono::milliseconds(5000)));
}

// A partition: decode is declared down while the request's prefill runs, so the request is
// cancelled, but the decode process is alive and holds the KV reservation. It hears the cancel as
// soon as it is heard from again, not when that reservation's lease ends.
TEST_F(DispatcherTest, ACancelForAWorkerThatIsDownReachesItWhenItIsHeardAgain) {
  FakeWorker* p = Add("p", v1::WORKER_ROLE_PREFILL,
                      {.first_token = 50, .prefill_delay = std::chrono::milliseconds(1500)});
  FakeWorker* d = Add("d", v1::WORKER_ROLE_DECODE, {.tokens = {51, 52}});
  auto plan = selector_.Select("fake-model", {});
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE(plan->disaggregated());
  CallCanceller canceller;
  CollectingSink sink;
  std::thread partition([&] {
    ASSERT_TRUE(p->WaitForCall("Prefill", std::chrono::milliseconds(5000)));
    registry_.MarkDown(plan->decode->worker(), "no heartbeat (test)");
  });
  auto outcome = async::BlockOn(&executor_, dispatcher_.Run(Request(3), *plan, &canceller, &sink));
  partition.join();
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kUnavailable) << outcome.status();
  EXPECT_TRUE(d->WaitForCall("ReserveKv req-1", std::chrono::milliseconds(0)));
  EXPECT_TRUE(p->WaitForCall("Cancel req-1", std::chrono::milliseconds(5000)))
      << "the prefill is up: told at once";
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(Count(*d, "Cancel req-1"), 0) << "sent to a worker the router cannot reach";
  Heartbeat(*d);
  EXPECT_TRUE(registry_.IsUp("d"));
  EXPECT_TRUE(WaitForCount(*d, "Cancel req-1", 1)) << "the owed cancel was not sent";
  Heartbeat(*d);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(Count(*d, "Cancel req-1"), 1) << "a cancel that got through was sent again";
}

// A cancel that does not get through is sent again with each of the worker's heartbeats, a
// bounded number of times.
TEST_F(DispatcherTest, ACancelThatDoesNotGetThroughIsSentAgainWithTheNextHeartbeats) {
  FakeWorker* w = Add("c", v1::WORKER_ROLE_COMBINED,
                      {.tokens = {60, 61, 62}, .hang_after = 1, .unavailable_first_cancels = 1});
  FakeWorker* stubborn = Add("s", v1::WORKER_ROLE_COMBINED, {.unavailable_first_cancels = 1000});
  registry_.Cancel(Entry("s", v1::WORKER_ROLE_COMBINED), "req-s");
  EXPECT_EQ(RunUntilTheClientLeaves(*w), absl::CancelledError("client left"));
  ASSERT_TRUE(WaitForCount(*w, "Cancel req-1", 1));
  ASSERT_TRUE(WaitForCount(*stubborn, "Cancel req-s", 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the answers are in
  for (int beat = 0; beat < 3 * WorkerRegistry::kMaxCancelSends; ++beat) {
    Heartbeat(*w);
    Heartbeat(*stubborn);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(Count(*w, "Cancel req-1"), 2) << "sent again once, until it got through";
  EXPECT_EQ(Count(*stubborn, "Cancel req-s"), WorkerRegistry::kMaxCancelSends);
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
