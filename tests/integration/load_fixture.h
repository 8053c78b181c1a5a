#pragma once

// A cluster of processes on loopback (router and workers, the real model) under many concurrent
// streams: each stream is classified (served, refused before its first byte, broken after it)
// and its greedy text compared with the same prompt's on a quiet cluster.

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <iostream>
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

namespace tandem::testing {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

inline const fs::path kShared(TANDEM_SHARED_DIR);
inline const fs::path kModel = kShared / "models" / "stories260K";

inline const std::vector<std::string> kPrompts = {"Once upon a time", "The boy and the girl",
                                           "Lily wanted to play", "One day a little dog",
                                           "The sun was shining", "Tom had a red ball"};


// How one streamed request ended.
struct StreamOutcome {
  int status = 0;
  bool done = false;       // ended with [DONE]
  bool error_event = false;
  std::string text;
};

inline StreamOutcome Classify(const HttpResponse& r) {
  StreamOutcome o;
  o.status = r.status;
  if (r.status == 0) o.text = r.body;  // why there was no answer
  if (r.status != 200) return o;
  for (const std::string& data : SseData(r.body)) {
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

class BurstTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kModel / "model.bin")) GTEST_SKIP() << "stories260K not found under " << kShared;
    dir_ = fs::temp_directory_path() /
           ("tandem_load_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (HasFailure()) {
      std::cerr << "logs kept in " << dir_ << "\n";
      return;
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void Start(Proc* p, const std::string& binary, const std::string& name,
             std::vector<std::string> extra) {
    StartProc(p, dir_, binary, name, kModel, extra);
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
      EXPECT_TRUE(o.status == 200 && o.done && !o.error_event)
          << "reference request failed: " << p << ": HTTP " << o.status
          << (o.error_event ? ", error event" : "") << (o.done ? "" : ", no [DONE]") << ": "
          << o.text;
      texts[p] = o.text;
    }
    return texts;
  }

  // `during` runs on its own thread while the streams are out (a fault to inject).
  BurstResult Burst(int streams, int max_tokens, const std::map<std::string, std::string>& reference,
                    std::function<void()> during = nullptr) {
    BurstResult result;
    std::mutex mu;
    std::vector<std::thread> clients;
    clients.reserve(streams);
    for (int i = 0; i < streams; ++i) {
      clients.emplace_back([&, i] {
        const std::string& prompt = kPrompts[i % kPrompts.size()];
        const auto sent = Clock::now();
        const StreamOutcome o =
            Classify(HttpRequest(http(), "POST", "/v1/completions", Body(prompt, max_tokens)));
        const auto took_ms =
            std::chrono::duration_cast<milliseconds>(Clock::now() - sent).count();
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
          problem = "HTTP status " + std::to_string(o.status) + " after " +
                    std::to_string(took_ms) + " ms " + o.text;
        }
        if (!problem.empty() && result.first_problem.empty()) result.first_problem = problem;
      });
    }
    std::thread fault;
    if (during) fault = std::thread(during);
    for (std::thread& t : clients) t.join();
    if (fault.joinable()) fault.join();
    return result;
  }

  // A burst far beyond a worker's queue: every stream served, exactly as on a quiet cluster.
  void ExpectWholeBurstServed(int streams, int max_tokens, std::function<void()> during = nullptr) {
    const auto reference = Reference(max_tokens);
    const BurstResult r = Burst(streams, max_tokens, reference, std::move(during));
    EXPECT_EQ(r.broken, 0) << r.first_problem;
    EXPECT_EQ(r.other, 0) << r.first_problem;
    EXPECT_EQ(r.wrong_text, 0) << r.first_problem;
    EXPECT_EQ(r.served, streams) << "refused " << r.refused;
  }

  double Metric(const Proc& p, const std::string& name) {
    return MetricValue(HttpGet(p.ports[1], "/metrics"), name);
  }
  // Every worker-side request and reservation ended: nothing leaked by the burst.
  // A worker that died meanwhile is skipped, and said so: a decode can die with its prefill peer
  // (UCX 1.13's TCP wireup asserts when the peer vanishes mid-handshake; docs/operations.md).
  void ExpectWorkersIdle(std::initializer_list<const Proc*> workers) {
    for (const Proc* w : workers) {
      if (!w->process.running()) {
        std::cerr << "note: worker pid " << w->process.pid() << " exited during the test; see "
                  << dir_ << "\n";
        continue;
      }
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

}  // namespace tandem::testing
