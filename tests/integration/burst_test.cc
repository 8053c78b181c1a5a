// Serving under a burst, as processes on loopback (router + 1 prefill + 1 decode, or one combined
// worker) with the real model: far more concurrent streams than the workers' engines admit. What
// must hold whatever the routing policy: no stream that started ever breaks (a decode worker
// never refuses a request whose first token went out), a refusal is a 429/503 before the first
// byte, the router queues rather than refuses, and greedy outputs are those of a quiet cluster.

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
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
using testing::HttpRequest;
using testing::HttpResponse;
using Clock = std::chrono::steady_clock;

const fs::path kShared(TANDEM_SHARED_DIR);
const fs::path kModel = kShared / "models" / "stories260K";

const std::vector<std::string> kPrompts = {"Once upon a time", "The boy and the girl",
                                           "Lily wanted to play", "One day a little dog",
                                           "The sun was shining", "Tom had a red ball"};

using testing::Proc;

// How one streamed request ended.
struct StreamOutcome {
  int status = 0;
  bool done = false;       // ended with [DONE]
  bool error_event = false;
  std::string text;
};

StreamOutcome Classify(const HttpResponse& r) {
  StreamOutcome o;
  o.status = r.status;
  if (r.status != 200) return o;
  for (const std::string& data : testing::SseData(r.body)) {
    if (data == "[DONE]") {
      o.done = true;
      continue;
    }
    const json event = json::parse(data, nullptr, /*allow_exceptions=*/false);
    if (event.is_discarded() || event.contains("error")) {
      o.error_event = true;
      continue;
    }
    for (const json& choice : event.value("choices", json::array())) {
      if (choice.contains("text") && choice["text"].is_string()) o.text += choice["text"];
    }
  }
  return o;
}

struct BurstResult {
  int served = 0;
  int refused = 0;  // 429/503 before any byte of the stream
  int broken = 0;   // a 200 stream with an error event or without [DONE]
  int other = 0;
  int wrong_text = 0;
  std::string first_problem;
};

constexpr int kBurst = 600;
constexpr int kTokens = 16;

class BurstTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kModel / "model.bin")) GTEST_SKIP() << "stories260K not found under " << kShared;
    dir_ = fs::temp_directory_path() /
           ("tandem_burst_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void Start(Proc* p, const std::string& binary, const std::string& name,
             std::vector<std::string> extra) {
    testing::StartProc(p, dir_, binary, name, kModel, extra);
  }
  void StartRouter(std::vector<std::string> extra) {
    std::vector<std::string> args = {"--http-listen", "127.0.0.1:0", "--control-listen",
                                     "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    Start(&router_, TANDEM_ROUTER_BIN, "router", args);
  }
  void StartWorker(Proc* p, const std::string& binary, const std::string& name,
                   std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--threads", "1", "--router",
                                     "127.0.0.1:" + std::to_string(router_.ports[1]),
                                     "--heartbeat-ms", "200"};
    args.insert(args.end(), extra.begin(), extra.end());
    Start(p, binary, name, args);
  }
  void WaitReady() {
    const auto deadline = Clock::now() + seconds(30);
    while (Clock::now() < deadline) {
      if (HttpRequest(http(), "GET", "/ready").status == 200) return;
      std::this_thread::sleep_for(milliseconds(50));
    }
    FAIL() << "the router never became ready:\n" << router_.process.log();
  }
  int http() const { return router_.ports[0]; }

  static std::string Body(const std::string& prompt, int max_tokens) {
    return json{{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0},
                {"stream", true}}
        .dump();
  }

  // Each prompt's greedy text from a quiet cluster, one request at a time.
  std::map<std::string, std::string> Reference(int max_tokens) {
    std::map<std::string, std::string> texts;
    for (const std::string& p : kPrompts) {
      const StreamOutcome o = Classify(HttpRequest(http(), "POST", "/v1/completions", Body(p, max_tokens)));
      EXPECT_TRUE(o.status == 200 && o.done && !o.error_event) << "reference request failed: " << p;
      texts[p] = o.text;
    }
    return texts;
  }

  BurstResult Burst(int streams, int max_tokens, const std::map<std::string, std::string>& reference) {
    BurstResult result;
    std::mutex mu;
    std::vector<std::thread> clients;
    clients.reserve(streams);
    for (int i = 0; i < streams; ++i) {
      clients.emplace_back([&, i] {
        const std::string& prompt = kPrompts[i % kPrompts.size()];
        const StreamOutcome o =
            Classify(HttpRequest(http(), "POST", "/v1/completions", Body(prompt, max_tokens)));
        std::lock_guard<std::mutex> lock(mu);
        std::string problem;
        if (o.status == 200 && o.done && !o.error_event) {
          ++result.served;
          if (auto it = reference.find(prompt); it != reference.end() && it->second != o.text) {
            ++result.wrong_text;
            problem = "text differs from the quiet run for '" + prompt + "': " + o.text;
          }
        } else if (o.status == 429 || o.status == 503) {
          ++result.refused;
        } else if (o.status == 200) {
          ++result.broken;
          problem = o.error_event ? "a started stream carried an error event"
                                  : "a started stream ended without [DONE]";
        } else {
          ++result.other;
          problem = "HTTP status " + std::to_string(o.status);
        }
        if (!problem.empty() && result.first_problem.empty()) result.first_problem = problem;
      });
    }
    for (std::thread& t : clients) t.join();
    return result;
  }

  // A burst far beyond a worker's queue: every stream served, exactly as on a quiet cluster.
  void ExpectWholeBurstServed(int streams) {
    const auto reference = Reference(kTokens);
    const BurstResult r = Burst(streams, kTokens, reference);
    EXPECT_EQ(r.broken, 0) << r.first_problem;
    EXPECT_EQ(r.other, 0) << r.first_problem;
    EXPECT_EQ(r.wrong_text, 0) << r.first_problem;
    EXPECT_EQ(r.served, streams) << "refused " << r.refused;
  }

  double Metric(const Proc& p, const std::string& name) {
    return testing::MetricValue(testing::HttpGet(p.ports[1], "/metrics"), name);
  }
  // Every worker-side request and reservation ended: nothing leaked by the burst.
  void ExpectWorkersIdle(std::initializer_list<const Proc*> workers) {
    for (const Proc* w : workers) {
      const auto deadline = Clock::now() + seconds(10);
      double active = Metric(*w, "tandem_worker_active_requests");
      while (active != 0 && Clock::now() < deadline) {
        std::this_thread::sleep_for(milliseconds(50));
        active = Metric(*w, "tandem_worker_active_requests");
      }
      EXPECT_EQ(active, 0);
    }
  }

  fs::path dir_;
  Proc router_, prefill_, decode_, combined_;
};


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
  ExpectWholeBurstServed(120);
  ExpectWorkersIdle({&prefill_, &decode_});
}

TEST_F(BurstTest, ACombinedWorkerWithATinyQueueIsNeverOverrun) {
  StartRouter({});
  StartWorker(&combined_, TANDEM_WORKER_BIN, "combined", {"--max-in-flight", "4"});
  WaitReady();
  ExpectWholeBurstServed(120);
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

}  // namespace
}  // namespace tandem
