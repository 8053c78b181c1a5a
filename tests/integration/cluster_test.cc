// The whole cluster as processes on loopback: tandem-router in front of tandem-prefill and
// tandem-decode, KV over UCX. Exactness through every hop, the failure modes a production
// deployment meets (a worker killed mid-stream, a client that goes away), load, and bad input.

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cluster_processes.h"
#include "gtest/gtest.h"
#include "http_client.h"
#include "http_get.h"
#include "nlohmann/json.hpp"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::ChildProcess;
using testing::HttpConnection;
using testing::HttpRequest;
using testing::HttpResponse;
using Clock = std::chrono::steady_clock;

const fs::path kShared(TANDEM_SHARED_DIR);
const fs::path kModel = kShared / "models" / "stories260K";

using testing::Proc;

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kModel / "model.bin")) GTEST_SKIP() << "stories260K not found under " << kShared;
    dir_ = fs::temp_directory_path() /
           ("tandem_cluster_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    Start(&router_, TANDEM_ROUTER_BIN, "router",
          {"--http-listen", "127.0.0.1:0", "--control-listen", "127.0.0.1:0",
           "--worker-lease-ms", "1500", "--header-timeout-ms", "1000"});
    StartWorker(&prefill_, TANDEM_PREFILL_BIN, "prefill");
    StartWorker(&decode_, TANDEM_DECODE_BIN, "decode");
    ASSERT_TRUE(WaitReady(true, seconds(30))) << router_.process.log();
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void Start(Proc* p, const std::string& binary, const std::string& name,
             std::vector<std::string> extra) {
    testing::StartProc(p, dir_, binary, name, kModel, extra);
  }
  void StartWorker(Proc* p, const std::string& binary, const std::string& name) {
    Start(p, binary, name,
          {"--threads", "1", "--router", "127.0.0.1:" + std::to_string(router_.ports[1]),
           "--heartbeat-ms", "200"});
  }

  int http() const { return router_.ports[0]; }
  bool WaitReady(bool want, seconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      const bool ready = HttpRequest(http(), "GET", "/ready").status == 200;
      if (ready == want) return true;
      std::this_thread::sleep_for(milliseconds(50));
    }
    return false;
  }
  double WorkerMetric(const Proc& w, const std::string& name) {
    return testing::MetricValue(testing::HttpGet(w.ports[1], "/metrics"), name);
  }
  double RouterMetric(const std::string& name) {
    return testing::MetricValue(testing::HttpGet(http(), "/metrics"), name);
  }
  // Polls until `metric` of `w` satisfies `pred` or the timeout passes; returns the last value.
  template <typename Pred>
  double WaitMetric(const Proc& w, const std::string& metric, Pred pred, seconds timeout) {
    const auto deadline = Clock::now() + timeout;
    double v = WorkerMetric(w, metric);
    while (!pred(v) && Clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(50));
      v = WorkerMetric(w, metric);
    }
    return v;
  }

  static std::string StreamBody(int max_tokens, const std::string& prompt = "Once upon a time") {
    return json{{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0},
                {"stream", true}}
        .dump();
  }

  fs::path dir_;
  Proc router_, prefill_, decode_;
};

TEST_F(ClusterTest, CompletionsMatchLlama2cOnEveryFixtureLineThroughPrefillUcxDecode) {
  std::ifstream in(kShared / "fixtures" / "stories260K_greedy.jsonl");
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const json fx = json::parse(line);
    const auto prompt_ids = fx.at("prompt_ids").get<std::vector<int>>();
    const auto output_ids = fx.at("output_ids").get<std::vector<int>>();
    // run.c runs `steps` positions and the last prompt position yields the first output.
    const int max_tokens = fx.at("steps").get<int>() - static_cast<int>(prompt_ids.size()) + 1;
    SCOPED_TRACE(fx.at("prompt").get<std::string>());
    const HttpResponse r = HttpRequest(
        http(), "POST", "/v1/completions",
        json{{"prompt", fx.at("prompt")}, {"max_tokens", max_tokens}, {"temperature", 0},
             {"return_token_ids", true}}
            .dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const json body = json::parse(r.body);
    EXPECT_EQ(body["choices"][0]["prompt_token_ids"].get<std::vector<int>>(), prompt_ids);
    EXPECT_EQ(body["choices"][0]["token_ids"].get<std::vector<int>>(), output_ids);
    EXPECT_EQ(body["usage"]["completion_tokens"].get<int>(),
              static_cast<int>(output_ids.size()) + (body["choices"][0]["finish_reason"] == "stop"));
    ++cases;
  }
  EXPECT_GE(cases, 10);
  EXPECT_EQ(WorkerMetric(decode_, "tandem_worker_kv_handoffs_completed_total"), cases);
  EXPECT_GT(WorkerMetric(prefill_, "tandem_worker_kv_sent_bytes_total"), 0);
}

TEST_F(ClusterTest, StreamEndsWithDoneAndCarriesTheSameText) {
  const HttpResponse full = HttpRequest(
      http(), "POST", "/v1/completions",
      json{{"prompt", "The little dog"}, {"max_tokens", 40}, {"temperature", 0}}.dump());
  ASSERT_EQ(full.status, 200) << full.body;
  const HttpResponse streamed =
      HttpRequest(http(), "POST", "/v1/completions", StreamBody(40, "The little dog"));
  ASSERT_EQ(streamed.status, 200);
  EXPECT_NE(streamed.headers.find("text/event-stream"), std::string::npos);
  const auto events = testing::SseData(streamed.body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  for (std::size_t i = 0; i + 1 < events.size(); ++i) {
    const json chunk = json::parse(events[i]);
    if (!chunk["choices"].empty()) text += chunk["choices"][0].value("text", "");
  }
  EXPECT_EQ(text, json::parse(full.body)["choices"][0]["text"].get<std::string>());
}

TEST_F(ClusterTest, KilledDecodeFailsStreamsFastMarksItDownAndARestartedOneServes) {
  constexpr int kStreams = 16;
  std::vector<std::unique_ptr<HttpConnection>> conns;
  for (int i = 0; i < kStreams; ++i) {
    conns.push_back(std::make_unique<HttpConnection>(http(), 10));
    ASSERT_TRUE(conns.back()->SendRequest("POST", "/v1/completions", StreamBody(480)));
  }
  HttpResponse head;
  ASSERT_TRUE(conns[0]->ReadHead(&head));
  ASSERT_EQ(head.status, 200);
  ASSERT_FALSE(conns[0]->ReadBodyPiece().empty());  // streaming has begun
  decode_.process.Kill(SIGKILL);
  const auto killed_at = Clock::now();

  // Every stream ends (completed before the kill, or with an error) within 5 s.
  std::vector<std::thread> readers;
  std::atomic<int> errors{0}, done{0};
  for (int i = 0; i < kStreams; ++i) {
    readers.emplace_back([&, i] {
      HttpResponse r;
      if (i != 0 && !conns[i]->ReadHead(&r)) {
        errors.fetch_add(1);  // a clean HTTP-level failure
        return;
      }
      if (i != 0 && r.status != 200) {
        errors.fetch_add(1);
        return;
      }
      const std::string body = conns[i]->ReadWholeBody();
      if (body.find("\"error\"") != std::string::npos) errors.fetch_add(1);
      else if (body.find("[DONE]") != std::string::npos) done.fetch_add(1);
    });
  }
  for (auto& t : readers) t.join();
  EXPECT_LT(Clock::now() - killed_at, seconds(5));
  EXPECT_EQ(errors.load() + done.load(), kStreams);
  EXPECT_GE(errors.load(), 1);

  EXPECT_TRUE(WaitReady(false, seconds(5))) << "router still reports ready without a decode";
  StartWorker(&decode_, TANDEM_DECODE_BIN, "decode2");
  ASSERT_TRUE(WaitReady(true, seconds(10)));
  const HttpResponse after = HttpRequest(
      http(), "POST", "/v1/completions",
      json{{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}}.dump());
  EXPECT_EQ(after.status, 200) << after.body;
}

TEST_F(ClusterTest, ClientDisconnectStopsTheWorkOnTheWorkers) {
  constexpr int kStreams = 8;
  std::vector<std::unique_ptr<HttpConnection>> conns;
  for (int i = 0; i < kStreams; ++i) {
    conns.push_back(std::make_unique<HttpConnection>(http(), 10));
    ASSERT_TRUE(conns.back()->SendRequest("POST", "/v1/completions", StreamBody(480)));
  }
  for (auto& c : conns) {
    HttpResponse head;
    ASSERT_TRUE(c->ReadHead(&head));
    ASSERT_EQ(head.status, 200);
    ASSERT_FALSE(c->ReadBodyPiece().empty());
    c->Close();  // the client goes away mid-stream
  }
  const double cancelled = WaitMetric(
      decode_, "tandem_worker_requests_cancelled_total", [](double v) { return v >= 1; },
      seconds(5));
  EXPECT_GE(cancelled, 1) << "no stream was cancelled on the decode worker";
  EXPECT_EQ(WaitMetric(decode_, "tandem_worker_active_requests", [](double v) { return v == 0; },
                       seconds(5)),
            0);
  // A stream cut while its prefill was running frees the reservation when the Cancel lands.
  EXPECT_EQ(WaitMetric(prefill_, "tandem_worker_active_requests", [](double v) { return v == 0; },
                       seconds(5)),
            0);
  EXPECT_EQ(WaitMetric(decode_, "tandem_worker_kv_reserved_blocks", [](double v) { return v == 0; },
                       seconds(5)),
            0);
  const auto deadline = Clock::now() + seconds(5);
  while (RouterMetric("tandem_router_active_requests") != 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_EQ(RouterMetric("tandem_router_active_requests"), 0);
}

TEST_F(ClusterTest, TwoHundredConcurrentStreamsAllComplete) {
  constexpr int kStreams = 200;
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back([&, i] {
      const std::string prompt = i % 2 ? "Once upon a time" : "The boy and the girl";
      const HttpResponse r =
          HttpRequest(http(), "POST", "/v1/completions", StreamBody(24, prompt));
      const auto events = testing::SseData(r.body);
      if (r.status == 200 && !events.empty() && events.back() == "[DONE]" &&
          r.body.find("\"error\"") == std::string::npos) {
        ok.fetch_add(1);
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), kStreams);
  EXPECT_EQ(WaitMetric(decode_, "tandem_worker_active_requests", [](double v) { return v == 0; },
                       seconds(5)),
            0);
}

TEST_F(ClusterTest, BadInputGetsAnErrorEnvelopeAndLeavesNoState) {
  const struct {
    std::string body;
    int status;
  } cases[] = {
      {"{not json", 400},
      {R"({"prompt": 42, "max_tokens": 4})", 400},
      {R"({"messages": "hi"})", 400},
      {R"({"model": "no-such-model", "prompt": "a", "max_tokens": 4})", 404},
      {R"({"prompt": "a", "max_tokens": 100000})", 400},
  };
  for (const auto& c : cases) {
    const std::string path =
        c.body.find("messages") != std::string::npos ? "/v1/chat/completions" : "/v1/completions";
    const HttpResponse r = HttpRequest(http(), "POST", path, c.body);
    EXPECT_EQ(r.status, c.status) << c.body << " -> " << r.body;
    EXPECT_TRUE(json::parse(r.body, nullptr, false).contains("error")) << r.body;
  }
  const HttpResponse huge =
      HttpRequest(http(), "POST", "/v1/completions", std::string(10 << 20, 'x'));
  EXPECT_EQ(huge.status, 413);
  EXPECT_EQ(RouterMetric("tandem_router_active_requests"), 0);
  EXPECT_EQ(WorkerMetric(decode_, "tandem_worker_kv_reserved_blocks"), 0);
  // Still healthy afterwards.
  EXPECT_EQ(HttpRequest(http(), "GET", "/health").status, 200);
}

TEST_F(ClusterTest, SlowLorisHeadersAreCutOffWithoutHarm) {
  HttpConnection slow(http(), 10);
  ASSERT_TRUE(slow.ok());
  ASSERT_TRUE(slow.Send("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "));
  const auto start = Clock::now();
  // The router drops the connection once --header-timeout-ms (1 s here) passes.
  HttpResponse r;
  while (Clock::now() - start < seconds(8)) {
    if (!slow.Send("a")) break;  // the server closed the connection
    if (slow.ReadHead(&r)) break;  // or answered it (e.g. 408), then closes
    std::this_thread::sleep_for(milliseconds(200));
  }
  EXPECT_LT(Clock::now() - start, seconds(5));
  EXPECT_EQ(HttpRequest(http(), "GET", "/health").status, 200);
  EXPECT_EQ(RouterMetric("tandem_router_active_requests"), 0);
}

}  // namespace
}  // namespace tandem
