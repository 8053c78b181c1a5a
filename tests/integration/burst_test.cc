// Serving under a burst, as processes on loopback (router + 1 prefill + 1 decode, or one combined
// worker) with the real model: far more concurrent streams than the workers' engines admit. What
// must hold whatever the routing policy: no stream that started ever breaks (a decode worker
// never refuses a request whose first token went out), a refusal is a 429/503 before the first
// byte, the router queues rather than refuses, and greedy outputs are those of a quiet cluster.

#include <algorithm>
#include <atomic>
#include <fstream>
#include <string>

#include "load_fixture.h"

namespace tandem::testing {
namespace {

constexpr int kBurst = 600;
constexpr int kTokens = 16;

int ThreadsOf(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

class BurstPolicyTest : public BurstTest, public ::testing::WithParamInterface<std::string> {};

// The decode worker admits 256 requests and the router lets 512 out at once by default: a burst of
// 600 exceeds both.
TEST_P(BurstPolicyTest, NoStartedStreamBreaksAndTheBurstIsQueued) {
  StartRouter({"--routing-policy", GetParam()});
  StartWorker(&prefill_, TANDEM_PREFILL_BIN, "prefill");
  StartWorker(&decode_, TANDEM_DECODE_BIN, "decode");
  WaitReady();
  const auto reference = Reference(kTokens);
  const BurstResult r = Burst(kBurst, kTokens, reference);
  EXPECT_EQ(r.broken, 0) << r.first_problem;
  EXPECT_EQ(r.other, 0) << r.first_problem;
  EXPECT_EQ(r.wrong_text, 0) << r.first_problem;
  // Default flags: the router queues instead of refusing.
  EXPECT_GE(r.served, kBurst * 95 / 100) << "refused " << r.refused;
  ExpectWorkersIdle({&prefill_, &decode_});
}

INSTANTIATE_TEST_SUITE_P(Policies, BurstPolicyTest,
                         ::testing::Values("tandem", "round-robin", "least-load", "power-of-two",
                                           "sglang-cache-aware", "dynamo-cost"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

TEST_F(BurstTest, ADecodeWithATinyQueueNeverRefusesAHandedOffRequest) {
  StartRouter({"--routing-policy", "least-load"});
  StartWorker(&prefill_, TANDEM_PREFILL_BIN, "prefill");
  StartWorker(&decode_, TANDEM_DECODE_BIN, "decode", {"--max-in-flight", "4"});
  WaitReady();
  ExpectWholeBurstServed(120, kTokens);
  ExpectWorkersIdle({&prefill_, &decode_});
}

TEST_F(BurstTest, ACombinedWorkerWithATinyQueueIsNeverOverrun) {
  StartRouter({});
  StartWorker(&combined_, TANDEM_WORKER_BIN, "combined", {"--max-in-flight", "4"});
  WaitReady();
  ExpectWholeBurstServed(120, kTokens);
  ExpectWorkersIdle({&combined_});
}

// Concurrent prompts reach the prefill worker together (held ones are released as a batch within
// its step budget) and its engine computes several in one forward, with the outputs of a quiet
// cluster.
TEST_F(BurstTest, PrefillsShareEngineStepsWithUnchangedOutputs) {
  StartRouter({});
  StartWorker(&prefill_, TANDEM_PREFILL_BIN, "prefill");
  StartWorker(&decode_, TANDEM_DECODE_BIN, "decode");
  WaitReady();
  const auto reference = Reference(kTokens);
  const double steps_before = Metric(prefill_, "tandem_worker_prefill_steps_total");
  const double chunks_before = Metric(prefill_, "tandem_worker_prefill_chunks_total");
  const BurstResult r = Burst(48, kTokens, reference);
  EXPECT_EQ(r.served, 48) << r.first_problem;
  EXPECT_EQ(r.wrong_text, 0) << r.first_problem;
  const double steps = Metric(prefill_, "tandem_worker_prefill_steps_total") - steps_before;
  const double chunks = Metric(prefill_, "tandem_worker_prefill_chunks_total") - chunks_before;
  EXPECT_EQ(chunks, 48);
  EXPECT_LT(steps, chunks) << "every prompt was computed in a step of its own";
}

// A waiting request holds no thread: with one generation out at a time, hundreds of streams wait
// in the router's queue while its thread count stays that of an idle router (a thread per request
// would add one per stream).
TEST_F(BurstTest, QueuedStreamsHoldNoThreads) {
  StartRouter({"--max-in-flight", "1", "--generation-threads", "2", "--max-queue-wait-ms",
               "600000"});
  StartWorker(&prefill_, TANDEM_PREFILL_BIN, "prefill");
  StartWorker(&decode_, TANDEM_DECODE_BIN, "decode");
  WaitReady();
  (void)Reference(kTokens);  // warms every channel and pool first
  const pid_t router = router_.process.pid();
  const int idle_threads = ThreadsOf(router);
  ASSERT_GT(idle_threads, 0);
  int most_threads = idle_threads;
  double most_queued = 0;
  ExpectWholeBurstServed(300, kTokens, [&] {
    const auto give_up = Clock::now() + std::chrono::seconds(120);
    while (Clock::now() < give_up) {
      const double queued =
          MetricValue(HttpGet(http(), "/metrics"), "tandem_router_queue_depth");
      most_queued = std::max(most_queued, queued);
      most_threads = std::max(most_threads, ThreadsOf(router));
      if (most_queued >= 100 && queued == 0) return;
      std::this_thread::sleep_for(milliseconds(20));
    }
  });
  EXPECT_GE(most_queued, 100) << "the burst never queued: the test proves nothing";
  EXPECT_LT(most_threads, idle_threads + 16)
      << "the router grew from " << idle_threads << " to " << most_threads << " threads";
}

}  // namespace
}  // namespace tandem::testing
