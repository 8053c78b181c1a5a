// The hold queue end to end: HTTP requests through the router's real dispatcher to fake prefill and
// decode workers over gRPC. Under the tandem policy a prefill worker gets one prefill at a time and
// the router exports what it holds; with --prefill-hold-depth 0 (or a baseline policy) the same
// burst reaches the worker at once.
#include <string>
#include <thread>
#include <vector>

#include "router_fixture.h"

namespace tandem::router::testing {
namespace {

class PrefillHoldDispatchTest : public RouterTest {
 protected:
  // Sends `n` requests at once (distinct prompts) and waits for every answer.
  void Burst(int n) {
    std::vector<std::thread> clients;
    for (int i = 0; i < n; ++i) {
      clients.emplace_back([this, i] {
        RawResponse r = Post("/v1/completions",
                             {{"prompt", absl::StrCat("prompt number ", i)}, {"max_tokens", 2}});
        EXPECT_EQ(r.status, 200) << r.body;
      });
    }
    for (std::thread& t : clients) t.join();
  }

  FakeWorker* StartCluster(std::function<void(RouterConfig*)> configure) {
    StartRouter(std::move(configure));
    FakeWorker* prefill = AddWorker(
        "p1", v1::WORKER_ROLE_PREFILL,
        {.first_token = Ids("A")[0], .prefill_delay = std::chrono::milliseconds(150)});
    AddWorker("d1", v1::WORKER_ROLE_DECODE, {.tokens = Ids("BC")});
    return prefill;
  }
};

TEST_F(PrefillHoldDispatchTest, TandemSendsAPrefillWorkerOnePrefillAtATime) {
  FakeWorker* prefill = StartCluster(nullptr);  // defaults: tandem, depth 1
  Burst(4);
  EXPECT_EQ(prefill->max_concurrent_prefills(), 1);
  // Those that arrived while another was out waited in the router (the first went at once; the
  // other three normally arrive within its 150 ms).
  const double held = Metric("tandem_router_prefill_hold_seconds_count").value_or(-1);
  EXPECT_GE(held, 1.0);
  EXPECT_LE(held, 3.0);
  EXPECT_EQ(Metric("tandem_router_prefills_held"), 0.0);
  ExpectNothingInFlight();
}

TEST_F(PrefillHoldDispatchTest, WithoutTheHoldTheBurstReachesTheWorkerAtOnce) {
  FakeWorker* prefill =
      StartCluster([](RouterConfig* c) { c->prefill_hold_depth = 0; });
  Burst(4);
  EXPECT_GE(prefill->max_concurrent_prefills(), 2);
  EXPECT_EQ(Metric("tandem_router_prefill_hold_seconds_count"), 0.0);
  ExpectNothingInFlight();
}

TEST_F(PrefillHoldDispatchTest, BaselinePoliciesAreNotHeld) {
  FakeWorker* prefill =
      StartCluster([](RouterConfig* c) { c->routing_policy = "round-robin"; });
  Burst(4);
  EXPECT_GE(prefill->max_concurrent_prefills(), 2);
  ExpectNothingInFlight();
}

}  // namespace
}  // namespace tandem::router::testing
