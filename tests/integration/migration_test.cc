// Worker death under load, as processes on loopback with the real model: router + 2 prefill + 2
// decode (or 2 combined workers), 60 concurrent greedy streams, one worker killed with SIGKILL in
// the middle. Every stream must end with [DONE], carry no error event, and hold exactly the text
// the same request gets from a healthy cluster: the router resumes lost generations on the
// survivors from the tokens already sent.

#include <csignal>
#include <string>

#include "load_fixture.h"

namespace tandem::testing {
namespace {

constexpr int kStreams = 60;
constexpr int kTokens = 200;

class MigrationTest : public BurstTest {
 protected:
  void StartDisaggregated() {
    StartRouter({"--worker-lease-ms", "1500"});
    StartWorker(&prefill_, TANDEM_PREFILL_BIN, "prefill-a", {"--worker-id", "prefill-a"});
    StartWorker(&prefill_b_, TANDEM_PREFILL_BIN, "prefill-b", {"--worker-id", "prefill-b"});
    StartWorker(&decode_, TANDEM_DECODE_BIN, "decode-a", {"--worker-id", "decode-a"});
    StartWorker(&decode_b_, TANDEM_DECODE_BIN, "decode-b", {"--worker-id", "decode-b"});
    WaitReady();
  }
  double RouterMetric(const std::string& name) { return MetricValue(HttpGet(http(), "/metrics"), name); }
  // Polls `value` (bounded) until it passes `threshold`.
  template <typename Value>
  static bool WaitAbove(Value value, double threshold) {
    const auto deadline = Clock::now() + seconds(30);
    while (value() <= threshold) {
      if (Clock::now() > deadline) return false;
      std::this_thread::sleep_for(milliseconds(5));
    }
    return true;
  }
  void ExpectNothingLost(const BurstResult& r) {
    EXPECT_EQ(r.served, kStreams) << r.first_problem;
    EXPECT_EQ(r.broken, 0) << r.first_problem;
    EXPECT_EQ(r.refused, 0);
    EXPECT_EQ(r.wrong_text, 0) << r.first_problem;
  }

  Proc prefill_b_, decode_b_, combined_b_;
};

TEST_F(MigrationTest, ADecodeKilledMidStreamLosesNoStream) {
  StartDisaggregated();
  const auto reference = Reference(kTokens);
  const BurstResult r = Burst(kStreams, kTokens, reference, [&] {
    // Mid-stream: handed-off requests are decoding on the victim and have sent tokens.
    ASSERT_TRUE(
        WaitAbove([&] { return Metric(decode_, "tandem_worker_kv_handoffs_completed_total"); }, 2));
    ASSERT_TRUE(WaitAbove([&] { return Metric(decode_, "tandem_worker_active_streams"); }, 2));
    decode_.process.Kill(SIGKILL);
  });
  ExpectNothingLost(r);
  EXPECT_GE(RouterMetric("tandem_router_migrations_total"), 1);
  EXPECT_GT(RouterMetric("tandem_router_migrated_tokens_total"), 0);
  EXPECT_EQ(RouterMetric("tandem_router_migration_failures_total"), 0);
  ExpectWorkersIdle({&prefill_, &prefill_b_, &decode_b_});
}

TEST_F(MigrationTest, APrefillKilledBeforeItsHandoffLosesNoStream) {
  StartDisaggregated();
  const auto reference = Reference(kTokens);
  // Frozen, the victim takes prefills and never answers them: they are all cut mid-handoff when
  // it is killed.
  ASSERT_EQ(::kill(prefill_.process.pid(), SIGSTOP), 0);
  const BurstResult r = Burst(kStreams, kTokens, reference, [&] {
    ASSERT_TRUE(WaitAbove(
        [&] {
          return RouterMetric("tandem_router_worker_load{worker=\"prefill-a\",role=\"prefill\"}");
        },
        0));
    prefill_.process.Kill(SIGKILL);
  });
  ExpectNothingLost(r);
  EXPECT_GE(RouterMetric("tandem_router_migrations_total"), 1);
  ExpectWorkersIdle({&prefill_b_, &decode_, &decode_b_});
}

TEST_F(MigrationTest, ACombinedWorkerKilledMidStreamLosesNoStream) {
  StartRouter({"--worker-lease-ms", "1500"});
  StartWorker(&combined_, TANDEM_WORKER_BIN, "combined-a");
  StartWorker(&combined_b_, TANDEM_WORKER_BIN, "combined-b");
  WaitReady();
  const auto reference = Reference(kTokens);
  const BurstResult r = Burst(kStreams, kTokens, reference, [&] {
    ASSERT_TRUE(WaitAbove([&] { return Metric(combined_, "tandem_worker_active_streams"); }, 2));
    ASSERT_TRUE(WaitAbove([&] { return Metric(combined_, "tandem_worker_engine_steps_total"); }, 20));
    combined_.process.Kill(SIGKILL);
  });
  ExpectNothingLost(r);
  EXPECT_GE(RouterMetric("tandem_router_migrations_total"), 1);
  ExpectWorkersIdle({&combined_b_});
}

}  // namespace
}  // namespace tandem::testing
