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

// Pieces (docs/routing.md rule 11): a long prompt goes to its worker as a leading piece (a
// warm-up of that prefix) and its rest waits in the hold queue again, so a short request that
// came during the piece is computed before the rest. Without pieces the short one waits for the
// whole long prompt. The fake worker takes 100 us per prompt token (the router's prior is 125):
// a 0.2 s piece is 1,600 tokens before a speed is learnt; after it, 2,000, and the rest (about
// 1,900) is under two pieces, so it goes whole. The worker reports its pieces as cached when the
// rest comes; the request's usage does not count them.
TEST_F(PrefillHoldDispatchTest, AShortPromptPassesTheRestOfALongOneCutInPieces) {
  for (double piece_seconds : {0.2, 0.0}) {
    SCOPED_TRACE(piece_seconds > 0 ? "pieces" : "whole prompts");
    StartRouter([&](RouterConfig* c) { c->prefill_piece_seconds = piece_seconds; });
    FakeWorker* prefill = AddWorker("p1", v1::WORKER_ROLE_PREFILL,
                                    {.first_token = Ids("A")[0],
                                     .prefill_delay_per_token = std::chrono::microseconds(100),
                                     .prefix_cache = true});
    AddWorker("d1", v1::WORKER_ROLE_DECODE, {.tokens = Ids("BC")});
    const std::string long_prompt(3500, 'x');
    std::thread long_client([&] {
      RawResponse r = Post("/v1/completions", {{"prompt", long_prompt}, {"max_tokens", 2}});
      EXPECT_EQ(r.status, 200) << r.body;
      const json body = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
      EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 0) << r.body;
    });
    // The short one is sent while the long one's first prefill call (a piece, or all of it)
    // runs: 160 or 350 ms.
    EXPECT_TRUE(prefill->WaitForCall("Prefill", std::chrono::milliseconds(10000)));
    RawResponse short_answer = Post("/v1/completions", {{"prompt", "short"}, {"max_tokens", 2}});
    EXPECT_EQ(short_answer.status, 200) << short_answer.body;
    long_client.join();

    const std::vector<FakeWorker::PrefillSeen> seen = prefill->prefills();
    std::vector<int> lengths;
    for (const FakeWorker::PrefillSeen& p : seen) lengths.push_back(p.prompt_tokens);
    const int long_tokens = 3501;  // BOS + one token per byte
    const int short_tokens = 6;
    if (piece_seconds > 0) {
      ASSERT_EQ(seen.size(), 3u);
      EXPECT_TRUE(seen[0].warm_up);
      EXPECT_EQ(seen[0].prompt_tokens, 1600);
      EXPECT_FALSE(seen[1].warm_up);
      EXPECT_EQ(lengths, std::vector<int>({1600, short_tokens, long_tokens}));
      EXPECT_EQ(Metric("tandem_router_prefill_pieces_total"), 1.0);
    } else {
      EXPECT_EQ(lengths, std::vector<int>({long_tokens, short_tokens}));
      EXPECT_EQ(Metric("tandem_router_prefill_pieces_total"), 0.0);
    }
    EXPECT_EQ(prefill->max_concurrent_prefills(), 1);
    ExpectNothingInFlight();
    if (piece_seconds > 0) TearDown();  // the next round starts a router of its own
  }
}

}  // namespace
}  // namespace tandem::router::testing
