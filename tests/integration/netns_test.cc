// Network faults between hosts: router, two prefill and two decode workers, each in a network
// namespace of its own (netns_lab.h: veth links to a bridge in a separate namespace), KV moving
// over UCX's TCP transport across the links (UCX_TLS=tcp; shared-memory transports would bypass
// the network, the namespaces share one kernel). The faults are those of a real network: a host's
// link taken down (packets vanish; nothing is refused), a bandwidth cap (tbf), and, on the gRPC
// path from the router to a decode worker, a proxy that delays, stalls or resets the connections
// (fault_proxy.h). What must hold: no stream is lost, every greedy text equals the healthy run's,
// a partitioned worker is declared down within the lease and comes back cleanly, and KV that did
// not arrive whole is never used and its blocks go back to the pool.
//
// Skipped, saying why, where namespaces cannot be created (not root, no iproute2). Needs root.

#include <csignal>
#include <string>

#include "fault_proxy.h"
#include "load_fixture.h"
#include "netns_lab.h"

namespace tandem::testing {
namespace {

constexpr int kLeaseMs = 1500;
// Detection may take a lease after the last heartbeat that got through, plus the router's sweep
// (lease / 4, at most 250 ms); the rest is for scheduling on a loaded 2-core machine.
constexpr int kDetectionSlackMs = 1000;
constexpr int kStreams = 40;
constexpr int kTokens = 160;
// Inside the namespaces any port is free: each host has a port space of its own.
constexpr int kWorkerPort = 7000;

// ~300 tokens for stories260K: its KV (about 20 KB per 16-token block) takes seconds to cross a
// link capped at a few hundred kbit/s.
std::string LongPrompt() {
  std::string p;
  for (int i = 0; i < 14; ++i) p += "Once upon a time, there was a little girl named Lily. ";
  return p + "One day";
}

class NetnsTest : public BurstTest {
 protected:
  void SetUp() override {
    BurstTest::SetUp();
    if (IsSkipped()) return;
    if (std::string why = NetnsLab::Unavailable(); !why.empty()) {
      GTEST_SKIP() << "network namespaces cannot be created here, so the multi-host fault tests "
                      "do not run: "
                   << why;
    }
    NetnsLab::DeleteStale();
    ASSERT_EQ(lab_.Create({"router", "prefill-a", "prefill-b", "decode-a", "decode-b"}), "");
  }
  void TearDown() override {
    // Processes before their hosts; the proxy before the namespace its sockets live in.
    for (Proc* p : {&decode_b_, &decode_, &prefill_b_, &prefill_, &router_}) {
      p->process.Kill(SIGKILL);
    }
    proxy_.Stop();
    lab_.Destroy();
    BurstTest::TearDown();
  }

  void StartOn(const std::string& host, Proc* p, const std::string& binary,
               const std::vector<std::string>& extra) {
    const fs::path port_file = dir_ / (host + ".port");
    std::vector<std::string> args = lab_.Exec(host);
    // UCX over TCP on the host's link only (lo would not cross hosts).
    args.insert(args.end(), {"/usr/bin/env", "UCX_NET_DEVICES=eth0", "UCX_TLS=tcp", binary,
                             "--model", kModel.string(), "--port-file", port_file.string()});
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_TRUE(p->process.Start(args, (dir_ / (host + ".log")).string()));
    p->ports = WaitForPorts(port_file, milliseconds(30000));
    ASSERT_EQ(p->ports.size(), 2u) << host << " did not start:\n" << p->process.log();
  }

  void StartWorkerOn(const std::string& host, Proc* p, const std::string& binary,
                     const std::string& advertise) {
    StartOn(host, p, binary,
            {"--threads", "1", "--worker-id", host, "--router",
             lab_.ip("router") + ":" + std::to_string(router_.ports[1]), "--heartbeat-ms", "200",
             "--listen", lab_.ip(host) + ":" + std::to_string(kWorkerPort), "--advertise-host",
             advertise, "--metrics-listen", "0.0.0.0:0", "--ucx-transports", "tcp"});
  }

  // Router + 2P + 2D, every worker registered. `decode_a_advertise`: where the router dials
  // decode-a (its own address, or a proxy's).
  void StartCluster(const std::string& decode_a_advertise = "") {
    ASSERT_NO_FATAL_FAILURE(StartOn("router", &router_, TANDEM_ROUTER_BIN,
                                    {"--http-listen", "127.0.0.1:0", "--control-listen",
                                     lab_.ip("router") + ":0", "--worker-lease-ms",
                                     std::to_string(kLeaseMs)}));
    ASSERT_NO_FATAL_FAILURE(
        StartWorkerOn("prefill-a", &prefill_, TANDEM_PREFILL_BIN, lab_.ip("prefill-a")));
    ASSERT_NO_FATAL_FAILURE(
        StartWorkerOn("prefill-b", &prefill_b_, TANDEM_PREFILL_BIN, lab_.ip("prefill-b")));
    ASSERT_NO_FATAL_FAILURE(StartWorkerOn(
        "decode-a", &decode_, TANDEM_DECODE_BIN,
        decode_a_advertise.empty() ? lab_.ip("decode-a") : decode_a_advertise));
    ASSERT_NO_FATAL_FAILURE(
        StartWorkerOn("decode-b", &decode_b_, TANDEM_DECODE_BIN, lab_.ip("decode-b")));
    ASSERT_TRUE(WaitFor([&] {
      return WorkerUp("prefill-a") == 1 && WorkerUp("prefill-b") == 1 &&
             WorkerUp("decode-a") == 1 && WorkerUp("decode-b") == 1;
    })) << "not every worker registered:\n"
        << router_.process.log();
  }

  // Clients live on the router's host (its HTTP port listens on that host's loopback).
  void OnRouterHost(const std::function<void()>& fn) {
    ASSERT_TRUE(InNetns(lab_.ns("router"), fn)) << "cannot enter the router's namespace";
  }

  double RouterMetric(const std::string& name) {
    std::string page;
    InNetns(lab_.ns("router"), [&] { page = HttpGet(http(), "/metrics"); });
    return MetricValue(page, name);
  }
  double WorkerUp(const std::string& id) {
    const std::string role = id.substr(0, id.find('-'));
    return RouterMetric("tandem_router_worker_up{worker=\"" + id + "\",role=\"" + role + "\"}");
  }
  // Scraped on the worker's own host: works while its link is down.
  double HostMetric(const std::string& host, const std::string& name) {
    std::string page;
    InNetns(lab_.ns(host), [&] { page = HttpGet(ProcOf(host).ports[1], "/metrics"); });
    return MetricValue(page, name);
  }
  Proc& ProcOf(const std::string& host) {
    if (host == "prefill-a") return prefill_;
    if (host == "prefill-b") return prefill_b_;
    if (host == "decode-a") return decode_;
    if (host == "decode-b") return decode_b_;
    return router_;
  }

  static bool WaitFor(const std::function<bool()>& done, milliseconds timeout = seconds(30)) {
    const auto deadline = Clock::now() + timeout;
    while (!done()) {
      if (Clock::now() > deadline) return false;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return true;
  }

  void ExpectNothingLost(const BurstResult& r, int streams) {
    EXPECT_EQ(r.served, streams) << r.first_problem;
    EXPECT_EQ(r.broken, 0) << r.first_problem;
    EXPECT_EQ(r.refused, 0);
    EXPECT_EQ(r.other, 0) << r.first_problem;
    EXPECT_EQ(r.wrong_text, 0) << r.first_problem;
  }

  // Nothing of the faults is left on the worker: no request, no reservation, every KV block free
  // (or evictable) again.
  void ExpectIdle(const std::string& host, double free_blocks_baseline,
                  milliseconds within = seconds(45)) {
    EXPECT_TRUE(WaitFor(
        [&] {
          return HostMetric(host, "tandem_worker_active_requests") == 0 &&
                 HostMetric(host, "tandem_worker_kv_reserved_blocks") <= 0 &&
                 HostMetric(host, "tandem_worker_kv_active_handoffs") <= 0 &&
                 HostMetric(host, "tandem_worker_kv_free_blocks") == free_blocks_baseline;
        },
        within))
        << host << ": active " << HostMetric(host, "tandem_worker_active_requests")
        << ", reserved blocks " << HostMetric(host, "tandem_worker_kv_reserved_blocks")
        << ", open handoffs " << HostMetric(host, "tandem_worker_kv_active_handoffs")
        << ", free blocks " << HostMetric(host, "tandem_worker_kv_free_blocks") << " (baseline "
        << free_blocks_baseline << ")";
  }

  // One greedy completion, from the router's host.
  StreamOutcome Complete(const std::string& prompt, int max_tokens) {
    StreamOutcome o;
    OnRouterHost([&] {
      o = Classify(HttpRequest(http(), "POST", "/v1/completions", Body(prompt, max_tokens)));
    });
    return o;
  }

  NetnsLab lab_;
  FaultProxy proxy_;
  Proc prefill_b_, decode_b_;
};

// (a) Partition: decode-a's switch port goes down with streams decoding on it. The router hears
// no heartbeat and must declare it down within the lease, and move its streams to decode-b from
// the tokens already sent. When the port comes back, decode-a registers again, ends the streams
// the router gave up (nothing left held), and takes new work.
TEST_F(NetnsTest, APartitionedDecodeIsDetectedWithinTheLeaseAndComesBackCleanly) {
  ASSERT_NO_FATAL_FAILURE(StartCluster());
  // Each phase's time, for the runs that take far longer than usual.
  const auto start = Clock::now();
  const auto phase = [&](const std::string& what) {
    std::cerr << std::chrono::duration_cast<milliseconds>(Clock::now() - start).count()
              << " ms: " << what << "\n";
  };
  const std::string decode_a_load =
      "tandem_router_worker_load{worker=\"decode-a\",role=\"decode\"}";
  const double free_a = HostMetric("decode-a", "tandem_worker_kv_free_blocks");
  const double free_b = HostMetric("decode-b", "tandem_worker_kv_free_blocks");
  std::map<std::string, std::string> reference;
  OnRouterHost([&] { reference = Reference(kTokens); });
  ASSERT_FALSE(HasFailure());

  double detected_ms = -1;
  BurstResult r;
  OnRouterHost([&] {
    r = Burst(kStreams, kTokens, reference, [&] {
      // Mid-stream: handed-off requests are decoding on decode-a.
      ASSERT_TRUE(WaitFor([&] { return HostMetric("decode-a", "tandem_worker_active_streams") > 2; }));
      const auto cut = Clock::now();
      ASSERT_EQ(lab_.SetLinkUp("decode-a", false), "");
      ASSERT_TRUE(WaitFor([&] { return WorkerUp("decode-a") == 0; }, seconds(20)))
          << "the router never noticed the partition";
      detected_ms = std::chrono::duration<double, std::milli>(Clock::now() - cut).count();
    });
  });
  phase("the partitioned burst ended");
  ExpectNothingLost(r, kStreams);
  EXPECT_GT(detected_ms, 0);
  EXPECT_LE(detected_ms, kLeaseMs + kDetectionSlackMs) << "partition detected too late";
  std::cerr << "partition detected after " << detected_ms << " ms (lease " << kLeaseMs << ")\n";
  EXPECT_GE(RouterMetric("tandem_router_migrations_total"), 1);
  EXPECT_EQ(RouterMetric("tandem_router_migration_failures_total"), 0);

  // The link comes back: decode-a registers again and drops what it held for the moved streams.
  ASSERT_EQ(lab_.SetLinkUp("decode-a", true), "");
  ASSERT_TRUE(WaitFor([&] { return WorkerUp("decode-a") == 1; }, seconds(20)))
      << "decode-a did not come back:\n"
      << decode_.process.log();
  phase("decode-a is up again: active " +
        std::to_string(HostMetric("decode-a", "tandem_worker_active_requests")) + ", reserved " +
        std::to_string(HostMetric("decode-a", "tandem_worker_kv_reserved_blocks")) + ", handoffs " +
        std::to_string(HostMetric("decode-a", "tandem_worker_kv_active_handoffs")) + ", free " +
        std::to_string(HostMetric("decode-a", "tandem_worker_kv_free_blocks")));
  // What the router gave up during the partition (KV reservations whose prefill never came, among
  // them) is cancelled once decode-a is heard again: well before the router's 30 s reservation
  // lease would free it.
  ExpectIdle("decode-a", free_a, seconds(10));
  phase("decode-a is idle");
  // The router learns that from decode-a's next load report; a burst placed before it could see
  // decode-a as the busier worker.
  EXPECT_TRUE(WaitFor([&] { return RouterMetric(decode_a_load) == 0; }))
      << "the router still sees load on decode-a";
  phase("the router sees no load on decode-a");

  // ... and takes work again, with the same outputs.
  // Up to three bursts: one CI run in many placed a whole burst on decode-b, and one placed all
  // three there, both before the wait above existed (the router's accounting then still counted
  // the streams decode-a reported while cut off: each burst, a few hundred ms, fit in one
  // heartbeat interval; not proven). The message below says what the router saw; a decode-a that
  // never gets work fails.
  const double handed_before = HostMetric("decode-a", "tandem_worker_kv_handoffs_completed_total");
  const double b_handed_before =
      HostMetric("decode-b", "tandem_worker_kv_handoffs_completed_total");
  const double migrations_before = RouterMetric("tandem_router_migrations_total");
  for (int burst = 0; burst < 3; ++burst) {
    OnRouterHost([&] { r = Burst(kStreams / 2, kTokens, reference); });
    ExpectNothingLost(r, kStreams / 2);
    phase("burst " + std::to_string(burst) + " ended");
    if (HostMetric("decode-a", "tandem_worker_kv_handoffs_completed_total") > handed_before) break;
  }
  // What the router saw, for the rare run in which decode-a stays idle: a load it still counts on
  // decode-a, or handoffs to it that failed and moved (migrations), or none of these.
  EXPECT_GT(HostMetric("decode-a", "tandem_worker_kv_handoffs_completed_total"), handed_before)
      << "decode-a got no work in three bursts after it came back; decode-b took "
      << HostMetric("decode-b", "tandem_worker_kv_handoffs_completed_total") - b_handed_before
      << " handoffs, migrations during the bursts "
      << RouterMetric("tandem_router_migrations_total") - migrations_before
      << ", router load decode-a " << RouterMetric(decode_a_load) << " decode-b "
      << RouterMetric("tandem_router_worker_load{worker=\"decode-b\",role=\"decode\"}")
      << ", decode-a up " << WorkerUp("decode-a") << ", active streams "
      << HostMetric("decode-a", "tandem_worker_active_streams") << "\nrouter log:\n"
      << router_.process.log();
  ExpectIdle("decode-a", free_a);
  ExpectIdle("decode-b", free_b);
}

// (b) A bandwidth cap on every worker's link: KV handoffs take seconds instead of milliseconds,
// and every token is still the healthy run's.
TEST_F(NetnsTest, ABandwidthCapSlowsStreamsButChangesNoToken) {
  ASSERT_NO_FATAL_FAILURE(StartCluster());
  const std::string long_prompt = LongPrompt();
  std::map<std::string, std::string> reference;
  OnRouterHost([&] { reference = Reference(64); });
  const double bytes_before = RouterMetric("tandem_router_kv_handoff_bytes_total");
  auto sent = Clock::now();
  const StreamOutcome healthy = Complete(long_prompt, 32);
  const double healthy_ms = std::chrono::duration<double, std::milli>(Clock::now() - sent).count();
  ASSERT_TRUE(healthy.status == 200 && healthy.done && !healthy.error_event) << healthy.text;
  const double kv_bytes = RouterMetric("tandem_router_kv_handoff_bytes_total") - bytes_before;
  ASSERT_GT(kv_bytes, 100e3) << "the long prompt's KV is too small to see a cap";

  constexpr double kRateBits = 1e6;
  for (const char* host : {"prefill-a", "prefill-b", "decode-a", "decode-b"}) {
    ASSERT_EQ(lab_.CapBandwidth(host, "1mbit"), "");
  }
  sent = Clock::now();
  const StreamOutcome capped = Complete(long_prompt, 32);
  const double capped_ms = std::chrono::duration<double, std::milli>(Clock::now() - sent).count();
  EXPECT_TRUE(capped.status == 200 && capped.done && !capped.error_event) << capped.text;
  EXPECT_EQ(capped.text, healthy.text);
  // The KV alone needs bytes * 8 / rate on the capped link (80 %: tbf's bucket starts full).
  const double kv_ms = kv_bytes * 8 / kRateBits * 1000;
  std::cerr << "long prompt: " << healthy_ms << " ms healthy, " << capped_ms << " ms capped ("
            << kv_bytes << " KV bytes, " << kv_ms << " ms at the cap)\n";
  EXPECT_GT(capped_ms, healthy_ms + 0.8 * kv_ms) << "the cap did not slow the KV handoff";

  BurstResult r;
  OnRouterHost([&] { r = Burst(24, 64, reference); });
  ExpectNothingLost(r, 24);
}

// (c) A KV transfer cut in the middle: the prefill worker's link goes down while its KV crawls
// over a capped link to decode. The partial blocks must never be used (the flag gate: decode
// commits only when every block's flag holds the handoff's value), the request is served again
// from scratch with the healthy text, and the reserved blocks return to the pool. When the link
// comes back the prefill registers again, and outputs stay exact.
TEST_F(NetnsTest, AKvTransferCutMidwayIsNeverConsumedAndItsBlocksAreReclaimed) {
  ASSERT_NO_FATAL_FAILURE(StartCluster());
  const std::string long_prompt = LongPrompt();
  const StreamOutcome healthy = Complete(long_prompt, 32);
  ASSERT_TRUE(healthy.status == 200 && healthy.done && !healthy.error_event) << healthy.text;
  std::map<std::string, std::string> reference;
  OnRouterHost([&] { reference = Reference(64); });

  std::map<std::string, double> free_baseline, completed_before;
  for (const char* d : {"decode-a", "decode-b"}) {
    free_baseline[d] = HostMetric(d, "tandem_worker_kv_free_blocks");
    completed_before[d] = HostMetric(d, "tandem_worker_kv_handoffs_completed_total");
  }
  // ~300 KB of KV at 256 kbit/s: about ten seconds per transfer, plenty of time to cut one.
  for (const char* p : {"prefill-a", "prefill-b"}) ASSERT_EQ(lab_.CapBandwidth(p, "256kbit"), "");

  StreamOutcome outcome;
  std::jthread client([&] { outcome = Complete(long_prompt, 32); });  // joined on every exit
  std::string victim;
  ASSERT_TRUE(WaitFor([&] {
    for (const char* p : {"prefill-a", "prefill-b"}) {
      if (RouterMetric("tandem_router_worker_load{worker=\"" + std::string(p) +
                       "\",role=\"prefill\"}") > 0) {
        victim = p;
      }
    }
    return !victim.empty() && (HostMetric("decode-a", "tandem_worker_kv_active_handoffs") > 0 ||
                               HostMetric("decode-b", "tandem_worker_kv_active_handoffs") > 0);
  })) << "the request never reached a prefill worker";
  // Let the transfer get going, then cut the sender off.
  std::this_thread::sleep_for(milliseconds(1500));
  ASSERT_EQ(lab_.SetLinkUp(victim, false), "");
  std::cerr << "cut " << victim << "'s link mid-transfer\n";
  client.join();
  EXPECT_TRUE(outcome.status == 200 && outcome.done && !outcome.error_event) << outcome.text;
  EXPECT_EQ(outcome.text, healthy.text) << "the request served after the cut differs";

  // Exactly one handoff committed (the retry's): the cut one was never consumed.
  double committed = 0;
  for (const char* d : {"decode-a", "decode-b"}) {
    committed += HostMetric(d, "tandem_worker_kv_handoffs_completed_total") - completed_before[d];
  }
  EXPECT_EQ(committed, 1) << "a handoff other than the retry's was committed";
  for (const char* d : {"decode-a", "decode-b"}) ExpectIdle(d, free_baseline[d]);

  // The link comes back: the prefill registers again; whatever of the old transfer still
  // arrives must change nothing.
  ASSERT_EQ(lab_.SetLinkUp(victim, true), "");
  for (const char* p : {"prefill-a", "prefill-b"}) lab_.Uncap(p);
  ASSERT_TRUE(WaitFor([&] { return WorkerUp(victim) == 1; }, seconds(20)))
      << victim << " did not come back";
  BurstResult r;
  OnRouterHost([&] { r = Burst(24, 64, reference); });
  ExpectNothingLost(r, 24);
  const StreamOutcome again = Complete(long_prompt, 32);
  EXPECT_EQ(again.text, healthy.text);
  for (const char* d : {"decode-a", "decode-b"}) ExpectIdle(d, free_baseline[d]);
}

// (d) The gRPC path from the router to decode-a through a fault proxy (decode-a advertises the
// proxy's address; the proxy runs on the router's host and forwards to decode-a): a delayed path
// and a stalled one slow streams down but change no token; resetting the connections mid-stream
// makes the router move the streams (nothing lost), and decode-a lets go of every cut stream.
TEST_F(NetnsTest, DelayedStalledAndCutGrpcPathsLoseNoStream) {
  bool listening = false;
  ASSERT_TRUE(InNetns(lab_.ns("router"), [&] {
    listening = proxy_.Start(lab_.ip("router"), kWorkerPort, lab_.ip("decode-a"), kWorkerPort);
  }));
  ASSERT_TRUE(listening) << "the fault proxy cannot listen";
  ASSERT_NO_FATAL_FAILURE(StartCluster(lab_.ip("router")));
  const double free_a = HostMetric("decode-a", "tandem_worker_kv_free_blocks");
  std::map<std::string, std::string> reference;
  OnRouterHost([&] { reference = Reference(kTokens); });
  ASSERT_GT(proxy_.connections_accepted(), 0) << "the router does not dial decode-a via the proxy";

  // Delay: every piece of every gRPC message to and from decode-a waits 20 ms.
  proxy_.SetMode(FaultProxy::Mode::kDelay, milliseconds(20));
  BurstResult r;
  OnRouterHost([&] { r = Burst(kStreams / 2, kTokens, reference); });
  ExpectNothingLost(r, kStreams / 2);

  // Stall: the path hangs for 3 s (shorter than the lease: heartbeats go directly) mid-stream.
  proxy_.SetMode(FaultProxy::Mode::kPass);
  OnRouterHost([&] {
    r = Burst(kStreams / 2, kTokens, reference, [&] {
      ASSERT_TRUE(WaitFor([&] { return HostMetric("decode-a", "tandem_worker_active_streams") > 2; }));
      proxy_.SetMode(FaultProxy::Mode::kStall);
      std::this_thread::sleep_for(seconds(3));
      proxy_.SetMode(FaultProxy::Mode::kPass);
    });
  });
  ExpectNothingLost(r, kStreams / 2);

  // Cut: every connection to decode-a is reset mid-stream; the router sees its streams break
  // (UNAVAILABLE) and resumes them elsewhere.
  const double migrations = RouterMetric("tandem_router_migrations_total");
  OnRouterHost([&] {
    r = Burst(kStreams, kTokens, reference, [&] {
      ASSERT_TRUE(WaitFor([&] { return HostMetric("decode-a", "tandem_worker_active_streams") > 2; }));
      proxy_.Cut();
    });
  });
  ExpectNothingLost(r, kStreams);
  EXPECT_GT(RouterMetric("tandem_router_migrations_total"), migrations)
      << "no stream was moved: the cut did not hit a stream";
  ExpectIdle("decode-a", free_a);
}

}  // namespace
}  // namespace tandem::testing
