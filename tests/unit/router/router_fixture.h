#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../http/raw_client.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "fake_worker.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "router_server.h"

namespace tandem::router::testing {

using http::testing::RawClient;
using http::testing::RawResponse;
using nlohmann::json;
using std::chrono::milliseconds;

// A real RouterServer on ephemeral ports with the byte tokenizer, fake workers registered through
// its control port, and a raw HTTP client.
class RouterTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (router_) router_->Shutdown(absl::ZeroDuration());
    workers_.clear();
  }

  void StartRouter(std::function<void(RouterConfig*)> configure = nullptr, SteadyNow now = nullptr,
                   bool llama2c = false) {
    RouterServer::Options options;
    options.config.http_listen = "127.0.0.1:0";
    options.config.control_listen = "127.0.0.1:0";
    options.config.http_io_threads = 2;
    if (configure) configure(&options.config);
    options.served_model = "fake-model";
    options.tokenizer = {&tokenizer_, llama2c};
    options.now = std::move(now);
    auto router = RouterServer::Start(std::move(options));
    ASSERT_TRUE(router.ok()) << router.status();
    router_ = std::move(*router);
    control_ = std::make_unique<ControlClient>(router_->control_port());
  }

  FakeWorker* AddWorker(const std::string& id, v1::WorkerRole role, WorkerScript script,
                        std::uint32_t max_context = 4096) {
    workers_.push_back(std::make_unique<FakeWorker>(id, role, std::move(script), max_context));
    FakeWorker* w = workers_.back().get();
    grpc::Status st = control_->Register(w->Info());
    EXPECT_TRUE(st.ok()) << st.error_message();
    return w;
  }

  RawResponse Request(const std::string& method, const std::string& path,
                      const std::string& body = "", milliseconds timeout = milliseconds(10000)) {
    auto client = RawClient::Connect(router_->http_port());
    EXPECT_NE(client, nullptr);
    if (client == nullptr) return {};
    client->Send(absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n",
                              "Content-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body));
    auto response = client->ReadResponse(timeout);
    EXPECT_TRUE(response.has_value()) << method << " " << path << " got no response";
    return response.value_or(RawResponse{});
  }
  RawResponse Post(const std::string& path, const json& body) { return Request("POST", path, body.dump()); }

  // Opens a streaming request; the caller reads events.
  std::unique_ptr<RawClient> OpenStream(const std::string& path, const json& body, RawResponse* head) {
    auto client = RawClient::Connect(router_->http_port());
    const std::string text = body.dump();
    client->Send(absl::StrCat("POST ", path, " HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n",
                              "Content-Length: ", text.size(), "\r\n\r\n", text));
    auto h = client->ReadHead(milliseconds(10000));
    EXPECT_TRUE(h.has_value());
    if (h) *head = *h;
    return client;
  }

  // Every "data:" payload until the stream ends (or 10 s pass), [DONE] included.
  std::vector<std::string> StreamAll(const std::string& path, const json& body, RawResponse* head) {
    auto client = OpenStream(path, body, head);
    std::vector<std::string> events;
    while (auto event = client->ReadEvent(milliseconds(10000))) {
      EXPECT_TRUE(absl::StartsWith(*event, "data: ")) << *event;
      events.push_back(event->substr(6));
      if (events.back() == "[DONE]") break;
    }
    return events;
  }

  // The value of the sample whose line starts with `series` (name plus labels), or nullopt.
  std::optional<double> Metric(const std::string& series) {
    for (absl::string_view line : absl::StrSplit(router_->metrics_registry().RenderText(), '\n')) {
      if (!absl::StartsWith(line, series + " ")) continue;
      double v = 0;
      if (absl::SimpleAtod(line.substr(series.size() + 1), &v)) return v;
    }
    return std::nullopt;
  }

  void ExpectNothingInFlight() {
    // Streams finish on their own threads; give them a moment to unwind.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline &&
           (Metric("tandem_router_active_requests") != 0.0 ||
            Metric("tandem_router_active_streams") != 0.0)) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    EXPECT_EQ(Metric("tandem_router_active_requests"), 0.0);
    EXPECT_EQ(Metric("tandem_router_active_streams"), 0.0);
    EXPECT_EQ(Metric("tandem_router_queue_depth"), 0.0);
    EXPECT_EQ(router_->active_requests(), 0);
  }

  ByteTokenizer tokenizer_;
  std::unique_ptr<RouterServer> router_;
  std::unique_ptr<ControlClient> control_;
  std::vector<std::unique_ptr<FakeWorker>> workers_;
};

}  // namespace tandem::router::testing
