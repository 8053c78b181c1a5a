// The worker side of the drain (docs/deployment.md, "Drain"): /drain or SIGTERM fails readiness at
// once while liveness stays up, in-flight streams finish instead of being cut, the worker exits 0
// when it holds nothing, and a drain deadline bounds how long it waits. Processes on loopback:
// tandem-router in front of tandem-prefill and tandem-decode.

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cluster_processes.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "http_client.h"
#include "http_get.h"
#include "nlohmann/json.hpp"
#include "tandem/rpc/conversions.h"
#include "tandem/v1/worker.grpc.pb.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::HttpConnection;
using testing::HttpRequest;
using testing::HttpResponse;
using testing::Proc;
using Clock = std::chrono::steady_clock;

const fs::path kShared(TANDEM_SHARED_DIR);
const fs::path kModel = kShared / "models" / "stories260K";

class DrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kModel / "model.bin")) GTEST_SKIP() << "stories260K not found under " << kShared;
    dir_ = fs::temp_directory_path() /
           ("tandem_drain_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    // The lease only has to outlast a loaded machine's heartbeat stalls: nothing here waits for a
    // worker to be found dead, and a live decode taken for dead would have its streams migrated.
    testing::StartProc(&router_, dir_, TANDEM_ROUTER_BIN, "router", kModel,
                       {"--http-listen", "127.0.0.1:0", "--control-listen", "127.0.0.1:0",
                        "--worker-lease-ms", "4000"});
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void StartWorker(Proc* p, const std::string& binary, const std::string& name,
                   std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--threads", "1", "--router",
                                     "127.0.0.1:" + std::to_string(router_.ports[1]),
                                     "--heartbeat-ms", "200"};
    args.insert(args.end(), extra.begin(), extra.end());
    testing::StartProc(p, dir_, binary, name, kModel, args);
  }
  void StartCluster(std::vector<std::string> decode_extra = {}) {
    ASSERT_NO_FATAL_FAILURE(StartWorker(&prefill_, TANDEM_PREFILL_BIN, "prefill"));
    ASSERT_NO_FATAL_FAILURE(StartWorker(&decode_, TANDEM_DECODE_BIN, "decode", decode_extra));
    ASSERT_TRUE(WaitStatus(router_.ports[0], "/ready", 200, seconds(30))) << router_.process.log();
    ASSERT_TRUE(WaitStatus(decode_.ports[1], "/ready", 200, seconds(10))) << decode_.process.log();
  }

  static bool WaitStatus(int port, const std::string& path, int want, seconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      if (HttpRequest(port, "GET", path).status == want) return true;
      std::this_thread::sleep_for(milliseconds(50));
    }
    return false;
  }
  static double Metric(int port, const std::string& name) {
    return testing::MetricValue(testing::HttpGet(port, "/metrics"), name);
  }
  // Opens `n` greedy streams of `max_tokens` and returns once every one has its response head.
  std::vector<std::unique_ptr<HttpConnection>> OpenStreams(int n, int max_tokens) {
    std::vector<std::unique_ptr<HttpConnection>> conns;
    for (int i = 0; i < n; ++i) {
      conns.push_back(std::make_unique<HttpConnection>(router_.ports[0], 30));
      const std::string body = json{{"prompt", "Once upon a time"}, {"max_tokens", max_tokens},
                                    {"temperature", 0}, {"ignore_eos", true}, {"stream", true}}
                                   .dump();
      EXPECT_TRUE(conns.back()->SendRequest("POST", "/v1/completions", body));
    }
    for (auto& conn : conns) {
      HttpResponse head;
      EXPECT_TRUE(conn->ReadHead(&head));
      EXPECT_EQ(head.status, 200);
    }
    return conns;
  }
  // Reads every stream to its end: how many ended with [DONE] and no error event.
  static int CompletedStreams(std::vector<std::unique_ptr<HttpConnection>>& conns) {
    std::atomic<int> done{0};
    std::vector<std::thread> readers;
    for (std::size_t i = 0; i < conns.size(); ++i) {
      readers.emplace_back([&, i] {
        const std::string body = conns[i]->ReadWholeBody();
        if (body.find("\"error\"") == std::string::npos &&
            body.find("[DONE]") != std::string::npos) {
          done.fetch_add(1);
        }
      });
    }
    for (auto& t : readers) t.join();
    return done.load();
  }

  fs::path dir_;
  Proc router_, prefill_, decode_;
};

TEST_F(DrainTest, DrainEndpointFailsReadinessAtOnceFinishesStreamsAndExitsZero) {
  ASSERT_NO_FATAL_FAILURE(StartCluster());
  const int metrics = decode_.ports[1];
  EXPECT_EQ(Metric(metrics, "tandem_worker_draining"), 0);
  EXPECT_EQ(Metric(metrics, "tandem_worker_ready"), 1);

  constexpr int kStreams = 6;
  auto conns = OpenStreams(kStreams, 400);
  // Every stream on the decode before the drain: one still in prefill is the router's to place
  // elsewhere, not the draining worker's to finish (on a loaded machine some reached the decode
  // only after its drain began, and were migrated).
  const auto placed_by = Clock::now() + seconds(30);
  while (Metric(metrics, "tandem_worker_running_requests") < kStreams && Clock::now() < placed_by) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_EQ(Metric(metrics, "tandem_worker_running_requests"), kStreams);
  // The preStop hook's request: answered at once, whatever the worker holds.
  const auto drain_at = Clock::now();
  ASSERT_EQ(HttpRequest(metrics, "GET", "/drain").status, 200);
  EXPECT_LT(Clock::now() - drain_at, seconds(1));
  // Readiness fails at once; liveness does not (the kubelet must not restart a draining pod).
  EXPECT_EQ(HttpRequest(metrics, "GET", "/ready").status, 503);
  EXPECT_EQ(HttpRequest(metrics, "GET", "/live").status, 200);
  EXPECT_EQ(Metric(metrics, "tandem_worker_draining"), 1);
  EXPECT_EQ(Metric(metrics, "tandem_worker_ready"), 0);
  EXPECT_TRUE(decode_.process.running()) << "exited with streams in flight";

  // Every stream the decode held runs to its end on it: nothing cut, nothing migrated.
  EXPECT_EQ(CompletedStreams(conns), kStreams) << "router:\n"
                                               << router_.process.log() << "\ndecode:\n"
                                               << decode_.process.log();
  const auto code = decode_.process.WaitExit(milliseconds(10000));
  ASSERT_TRUE(code.has_value()) << "still running after its streams ended:\n"
                                << decode_.process.log();
  EXPECT_EQ(*code, 0) << decode_.process.log();
  EXPECT_NE(decode_.process.log().find("drained in"), std::string::npos) << decode_.process.log();
  EXPECT_EQ(Metric(router_.ports[0], "tandem_router_migrations_total"), 0) << router_.process.log();
}

// What the autoscalers read (docs/deployment.md, "Metrics the scalers use").
TEST_F(DrainTest, WorkersExportTheScalingSignals) {
  ASSERT_NO_FATAL_FAILURE(StartWorker(&prefill_, TANDEM_PREFILL_BIN, "prefill",
                                      {"--generation", "g7"}));
  ASSERT_NO_FATAL_FAILURE(StartWorker(&decode_, TANDEM_DECODE_BIN, "decode", {"--generation", "g7"}));
  ASSERT_TRUE(WaitStatus(router_.ports[0], "/ready", 200, seconds(30))) << router_.process.log();
  const HttpResponse r = HttpRequest(
      router_.ports[0], "POST", "/v1/completions",
      json{{"prompt", "Once upon a time there was a little girl"}, {"max_tokens", 8},
           {"temperature", 0}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const int prompt_tokens = json::parse(r.body)["usage"]["prompt_tokens"].get<int>();

  const std::string prefill = testing::HttpGet(prefill_.ports[1], "/metrics");
  EXPECT_GE(testing::MetricValue(prefill, "tandem_worker_prefill_tokens_total"), 1);
  EXPECT_LE(testing::MetricValue(prefill, "tandem_worker_prefill_tokens_total"), prompt_tokens);
  EXPECT_GT(testing::MetricValue(prefill, "tandem_worker_prefill_busy_seconds_total"), 0);
  EXPECT_GT(testing::MetricValue(prefill, "tandem_worker_prefill_tokens_per_second"), 0);
  EXPECT_EQ(testing::MetricValue(prefill, "tandem_worker_prefill_queued_tokens"), 0);
  EXPECT_EQ(testing::MetricValue(prefill, "tandem_worker_draining"), 0);
  EXPECT_NE(prefill.find("generation=\"g7\""), std::string::npos) << prefill;
  EXPECT_NE(prefill.find("tandem_worker_build_info{"), std::string::npos);
  EXPECT_NE(prefill.find("backend=\"cpu-"), std::string::npos) << prefill;

  // The client has its last event before the decode worker's stream RPC returns: its in-flight
  // count falls to 0 a moment later, so the page is read again until it has (bounded).
  const auto idle_names = {"tandem_worker_waiting_requests", "tandem_worker_running_requests",
                           "tandem_worker_active_requests", "tandem_worker_rpcs_in_flight",
                           "tandem_worker_requests_while_draining_total"};
  std::string decode = testing::HttpGet(decode_.ports[1], "/metrics");
  for (const auto until = Clock::now() + seconds(10); Clock::now() < until;) {
    bool idle = true;
    for (const char* name : idle_names) idle = idle && testing::MetricValue(decode, name) == 0;
    if (idle) break;
    std::this_thread::sleep_for(milliseconds(20));
    decode = testing::HttpGet(decode_.ports[1], "/metrics");
  }
  const double kv = testing::MetricValue(decode, "tandem_worker_kv_utilization");
  EXPECT_GE(kv, 0);
  EXPECT_LE(kv, 1);
  for (const char* name : idle_names) {
    EXPECT_EQ(testing::MetricValue(decode, name), 0) << name;
  }
  // Both workers computed the same KV format id, and it is what they registered with.
  const auto layout = [](const std::string& page) {
    const auto at = page.find("kv_layout_id=\"");
    return at == std::string::npos ? std::string() : page.substr(at, page.find('"', at + 14) - at);
  };
  EXPECT_FALSE(layout(prefill).empty());
  EXPECT_EQ(layout(prefill), layout(decode));
}

TEST_F(DrainTest, SigtermOnAnIdleWorkerExitsZeroPromptly) {
  ASSERT_NO_FATAL_FAILURE(StartCluster());
  const auto start = Clock::now();
  ::kill(prefill_.process.pid(), SIGTERM);
  const auto code = prefill_.process.WaitExit(milliseconds(8000));
  ASSERT_TRUE(code.has_value()) << prefill_.process.log();
  EXPECT_EQ(*code, 0);
  // Nothing held: no waiting beyond the deregistration call and the servers' shutdown.
  EXPECT_LT(Clock::now() - start, seconds(6));
  EXPECT_NE(prefill_.process.log().find("drained in"), std::string::npos) << prefill_.process.log();
}

// New work that reaches a worker after its drain began (a router that has not heard yet) is
// refused with the draining trailer, so that the router places it elsewhere; it is never served
// there, and the refusal is counted. A KV reservation held from before keeps the drain going.
TEST_F(DrainTest, NewWorkArrivingMidDrainIsRefusedWithTheDrainingTrailer) {
  ASSERT_NO_FATAL_FAILURE(StartCluster({"--drain-timeout-ms", "20000"}));
  auto stub = v1::Worker::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(decode_.ports[0]), grpc::InsecureChannelCredentials()));
  const auto reserve = [&](const std::string& id, grpc::ClientContext* ctx) {
    v1::ReserveKvRequest request;
    *request.mutable_version() = rpc::CurrentVersion();
    request.set_request_id(id);
    request.set_num_tokens(8);
    request.set_lease_ms(20000);
    v1::ReserveKvResponse response;
    ctx->set_deadline(std::chrono::system_clock::now() + seconds(5));
    return stub->ReserveKv(ctx, request, &response);
  };
  grpc::ClientContext before_ctx;
  ASSERT_TRUE(reserve("held-from-before", &before_ctx).ok());
  ASSERT_EQ(HttpRequest(decode_.ports[1], "GET", "/drain").status, 200);

  grpc::ClientContext late_ctx;
  const grpc::Status late = reserve("arrived-mid-drain", &late_ctx);
  EXPECT_EQ(late.error_code(), grpc::StatusCode::UNAVAILABLE) << late.error_message();
  EXPECT_EQ(late_ctx.GetServerTrailingMetadata().count(rpc::kDrainingTrailer), 1u);
  EXPECT_EQ(Metric(decode_.ports[1], "tandem_worker_drain_refusals_total"), 1);
  EXPECT_EQ(Metric(decode_.ports[1], "tandem_worker_requests_while_draining_total"), 0);

  // Giving the held reservation back ends the drain.
  grpc::ClientContext cancel_ctx;
  v1::CancelRequest cancel;
  cancel.set_request_id("held-from-before");
  v1::CancelResponse cancelled;
  ASSERT_TRUE(stub->Cancel(&cancel_ctx, cancel, &cancelled).ok());
  const auto code = decode_.process.WaitExit(milliseconds(15000));
  ASSERT_TRUE(code.has_value()) << decode_.process.log();
  EXPECT_EQ(*code, 0);
}

TEST_F(DrainTest, DeadlineBoundsTheDrainOfAWorkerThatKeepsStreaming) {
  ASSERT_NO_FATAL_FAILURE(StartCluster({"--drain-timeout-ms", "300"}));
  auto conns = OpenStreams(4, 480);
  const auto start = Clock::now();
  ::kill(decode_.process.pid(), SIGTERM);
  // A second SIGTERM (the kubelet's, after preStop) must not restart or shorten anything.
  ::kill(decode_.process.pid(), SIGTERM);
  const auto code = decode_.process.WaitExit(milliseconds(8000));
  ASSERT_TRUE(code.has_value()) << decode_.process.log();
  EXPECT_EQ(*code, 0);
  // 300 ms of drain + deregistration + up to 2 s of gRPC shutdown.
  EXPECT_LT(Clock::now() - start, seconds(5));
  const std::string log = decode_.process.log();
  if (log.find("drained in") == std::string::npos) {
    EXPECT_NE(log.find("drain ended after"), std::string::npos) << log;
  }
  for (auto& c : conns) c->Close();
}

}  // namespace
}  // namespace tandem
