// Prefill batching under the hold queue, end to end through the router's dispatcher: prefills
// held while a long prompt occupies the prefill worker go out together once it is free, as many
// as fit the worker's announced step budget, so the worker computes them in one engine step
// instead of one after another.
#include <string>
#include <thread>
#include <vector>

#include "router_fixture.h"

namespace tandem::router::testing {
namespace {

using std::chrono::milliseconds;

class PrefillBatchDispatchTest : public RouterTest {
 protected:
  FakeWorker* StartCluster(std::function<void(RouterConfig*)> configure) {
    StartRouter(std::move(configure));
    FakeWorker* prefill = AddWorker("p1", v1::WORKER_ROLE_PREFILL,
                                    {.first_token = Ids("A")[0],
                                     .prefill_delay = milliseconds(300),
                                     .max_batch_tokens = 64});
    AddWorker("d1", v1::WORKER_ROLE_DECODE, {.tokens = Ids("BC")});
    return prefill;
  }
  // A long prompt (over the budget) occupies the worker; short ones arrive meanwhile and are held.
  void LongThenShort(FakeWorker* prefill, int shorts) {
    std::vector<std::thread> clients;
    clients.emplace_back([this] {
      EXPECT_EQ(Post("/v1/completions", {{"prompt", std::string(100, 'x')}, {"max_tokens", 2}}).status,
                200);
    });
    ASSERT_TRUE(prefill->WaitForCall("Prefill", milliseconds(5000)));
    for (int i = 0; i < shorts; ++i) {
      clients.emplace_back([this, i] {
        EXPECT_EQ(Post("/v1/completions", {{"prompt", absl::StrCat("s", i)}, {"max_tokens", 2}}).status,
                  200);
      });
    }
    for (std::thread& t : clients) t.join();
  }
};

TEST_F(PrefillBatchDispatchTest, HeldPrefillsThatFitTheStepBudgetGoOutTogether) {
  FakeWorker* prefill = StartCluster(nullptr);  // tandem, depth 1, the worker's budget
  LongThenShort(prefill, 4);
  // The long one went alone; the four held short ones (4 tokens each) were released at once.
  EXPECT_EQ(prefill->max_concurrent_prefills(), 4);
  EXPECT_GE(Metric("tandem_router_prefill_hold_seconds_count").value_or(0), 4.0);
  EXPECT_EQ(Metric("tandem_router_prefills_held"), 0.0);
  ExpectNothingInFlight();
}

TEST_F(PrefillBatchDispatchTest, WithoutABudgetHeldPrefillsGoOneAtATime) {
  FakeWorker* prefill = StartCluster([](RouterConfig* c) { c->prefill_batch_tokens = 0; });
  LongThenShort(prefill, 3);
  EXPECT_EQ(prefill->max_concurrent_prefills(), 1);
  ExpectNothingInFlight();
}

}  // namespace
}  // namespace tandem::router::testing
