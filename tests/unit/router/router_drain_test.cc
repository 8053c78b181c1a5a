// The router's own drain (SIGTERM, docs/deployment.md): readiness fails at once, requests that
// still arrive are served, in-flight generations finish within the deadline, and what is left at
// the deadline ends with an error event rather than a silently cut stream.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "fake_worker.h"
#include "router_fixture.h"

namespace tandem::router::testing {
namespace {

using std::chrono::milliseconds;

TEST_F(RouterTest, DrainFailsReadinessServesLateArrivalsAndFinishesInFlightStreams) {
  StartRouter();
  AddWorker("w1", v1::WORKER_ROLE_COMBINED,
            {.tokens = Ids("abcdefgh"), .token_delay = milliseconds(60)});
  RawResponse head;
  auto stream = OpenStream("/v1/completions", {{"prompt", "x"}, {"max_tokens", 8}, {"stream", true}},
                           &head);
  ASSERT_EQ(head.status, 200);
  ASSERT_TRUE(stream->ReadEvent(milliseconds(5000)).has_value());  // in flight

  router_->BeginDrain();
  EXPECT_EQ(Request("GET", "/ready").status, 503);
  EXPECT_EQ(Metric("tandem_router_draining"), 1.0);
  // The load balancer has not caught up yet: what still arrives is served.
  const RawResponse late = Post("/v1/completions", {{"prompt", "y"}, {"max_tokens", 2}});
  EXPECT_EQ(late.status, 200) << late.body;

  bool drained = false;
  std::thread drain([&] {
    drained = router_->Drain(std::chrono::steady_clock::now() + std::chrono::seconds(10), [] {
      std::this_thread::sleep_for(milliseconds(10));
      return false;
    });
  });
  std::vector<std::string> events;
  while (auto event = stream->ReadEvent(milliseconds(5000))) {
    events.push_back(*event);
    if (*event == "data: [DONE]") break;
  }
  drain.join();
  EXPECT_TRUE(drained);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "data: [DONE]");
  for (const std::string& e : events) EXPECT_EQ(e.find("error"), std::string::npos) << e;
  EXPECT_EQ(router_->active_requests(), 0);
}

TEST_F(RouterTest, DrainDeadlineCancelsWhatIsLeftWithAnErrorEvent) {
  StartRouter();
  AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("abc"), .hang_after = 1});
  RawResponse head;
  auto stream = OpenStream("/v1/completions", {{"prompt", "x"}, {"max_tokens", 3}, {"stream", true}},
                           &head);
  ASSERT_EQ(head.status, 200);
  ASSERT_TRUE(stream->ReadEvent(milliseconds(5000)).has_value());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(router_->Drain(start + milliseconds(300), [] {
    std::this_thread::sleep_for(milliseconds(10));
    return false;
  }));
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(300));
  EXPECT_EQ(router_->active_requests(), 1);
  std::thread shutdown([&] { router_->Shutdown(absl::ZeroDuration()); });
  std::vector<std::string> events;
  while (auto event = stream->ReadEvent(milliseconds(5000))) events.push_back(*event);
  shutdown.join();
  bool error_event = false;
  for (const std::string& e : events) error_event |= e.find("error") != std::string::npos;
  EXPECT_TRUE(error_event) << "the cancelled stream ended without telling the client";
}

TEST_F(RouterTest, DrainEndsEarlyWhenInterrupted) {
  StartRouter();
  AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("abc"), .hang_after = 1});
  RawResponse head;
  auto stream = OpenStream("/v1/completions", {{"prompt", "x"}, {"max_tokens", 3}, {"stream", true}},
                           &head);
  ASSERT_TRUE(stream->ReadEvent(milliseconds(5000)).has_value());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(router_->Drain(start + std::chrono::seconds(30), [] { return true; }));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  router_->Shutdown(absl::ZeroDuration());
}

}  // namespace
}  // namespace tandem::router::testing
