// API keys, 401 envelopes, SIGHUP reload and per-key / per-tenant limits (issue 17, items 1-2).
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "router_fixture.h"
#include "tandem/security/api_keys.h"
#include "tandem/security/digest.h"

namespace tandem::router::testing {
namespace {

namespace fs = std::filesystem;

std::string KeyLine(const std::string& key, const std::string& tenant, const json& limits = json::object(),
                    const std::string& traffic_class = "") {
  json line = {{"key_sha256", security::Sha256Hex(key)}, {"tenant", tenant}, {"limits", limits}};
  if (!traffic_class.empty()) line["traffic_class"] = traffic_class;
  return line.dump();
}

class SecurityTest : public RouterTest {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           absl::StrCat("tandem-keys-", ::getpid(), "-",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    keys_file_ = (dir_ / "keys.jsonl").string();
  }
  void TearDown() override {
    RouterTest::TearDown();
    fs::remove_all(dir_);
  }
  void WriteKeys(const std::vector<std::string>& lines) {
    std::ofstream out(keys_file_ + ".tmp");
    out << "# test keys\n";
    for (const std::string& l : lines) out << l << "\n";
    out.close();
    fs::rename(keys_file_ + ".tmp", keys_file_);
  }
  void StartWithKeys(const std::vector<std::string>& lines,
                     std::function<void(RouterConfig*)> more = nullptr) {
    WriteKeys(lines);
    RouterServer::Options options;
    StartRouterWithClock([this, more](RouterConfig* c) {
      c->api_keys_file = keys_file_;
      if (more) more(c);
    });
  }
  // The router with the limits on the fake clock below.
  void StartRouterWithClock(std::function<void(RouterConfig*)> configure) {
    RouterServer::Options options;
    options.config.http_listen = "127.0.0.1:0";
    options.config.control_listen = "127.0.0.1:0";
    options.config.http_io_threads = 2;
    configure(&options.config);
    options.served_model = "fake-model";
    options.tokenizer = {&tokenizer_, false};
    options.limits_now = [this] {
      return std::chrono::steady_clock::time_point(std::chrono::milliseconds(clock_ms_.load()));
    };
    auto router = RouterServer::Start(std::move(options));
    ASSERT_TRUE(router.ok()) << router.status();
    router_ = std::move(*router);
    control_ = std::make_unique<ControlClient>(router_->control_port());
  }
  void Advance(std::chrono::milliseconds d) { clock_ms_ += d.count(); }

  RawResponse Send(const std::string& method, const std::string& path, const std::string& headers,
                   const std::string& body = "") {
    auto client = RawClient::Connect(router_->http_port());
    client->Send(absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: t\r\n", headers,
                              "Content-Type: application/json\r\nContent-Length: ", body.size(),
                              "\r\nConnection: close\r\n\r\n", body));
    return client->ReadResponse(milliseconds(10000)).value_or(RawResponse{});
  }
  RawResponse PostWith(const std::string& path, const json& body, const std::string& headers) {
    return Send("POST", path, headers, body.dump());
  }
  std::unique_ptr<RawClient> OpenStreamWith(const std::string& path, const json& body,
                                            const std::string& headers, RawResponse* head) {
    auto client = RawClient::Connect(router_->http_port());
    const std::string text = body.dump();
    client->Send(absl::StrCat("POST ", path, " HTTP/1.1\r\nHost: t\r\n", headers,
                              "Content-Type: application/json\r\nContent-Length: ", text.size(),
                              "\r\n\r\n", text));
    auto h = client->ReadHead(milliseconds(10000));
    EXPECT_TRUE(h.has_value());
    if (h) *head = *h;
    return client;
  }

  fs::path dir_;
  std::string keys_file_;
  std::atomic<std::int64_t> clock_ms_{1000000};
};

const json kCompletion = {{"prompt", "Hi"}, {"max_tokens", 2}};
const json kChat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}};
const json kResponses = {{"input", "Hi"}, {"max_output_tokens", 2}};
const json kMessages = {{"model", "fake-model"},
                        {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                        {"max_tokens", 2}};

struct Endpoint {
  std::string path;
  json body;
  bool anthropic;
};
const std::vector<Endpoint>& ProtectedEndpoints() {
  static const auto* endpoints = new std::vector<Endpoint>{
      {"/v1/completions", kCompletion, false},
      {"/v1/chat/completions", kChat, false},
      {"/v1/responses", kResponses, false},
      {"/v1/messages", kMessages, true},
      {"/v1/messages/count_tokens", kMessages, true},
  };
  return *endpoints;
}

void ExpectUnauthorized(const RawResponse& r, bool anthropic, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(r.status, 401) << r.body;
  const json body = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(body.is_object()) << r.body;
  if (anthropic) {
    EXPECT_EQ(body["type"], "error");
    EXPECT_EQ(body["error"]["type"], "authentication_error");
    EXPECT_TRUE(body["error"]["message"].is_string());
  } else {
    EXPECT_EQ(body["error"]["code"], "invalid_api_key");
    EXPECT_EQ(body["error"]["type"], "invalid_request_error");
    EXPECT_TRUE(body["error"]["message"].is_string());
    EXPECT_TRUE(body["error"].contains("param"));
  }
  EXPECT_NE(r.Header("www-authenticate"), "");
}

TEST_F(SecurityTest, EveryProtectedEndpointAnswers401InItsProtocolsEnvelope) {
  StartWithKeys({KeyLine("tdm-good", "acme")});
  FakeWorker* w = AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids(" there")});
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"missing", ""},
      {"malformed: another scheme", "Authorization: Basic dXNlcjpwYXNz\r\n"},
      {"malformed: empty bearer", "Authorization: Bearer \r\n"},
      {"malformed: a space inside", "x-api-key: tdm good\r\n"},
      {"malformed: too long", absl::StrCat("x-api-key: ", std::string(600, 'k'), "\r\n")},
      {"unknown bearer", "Authorization: Bearer tdm-bad\r\n"},
      {"unknown x-api-key", "x-api-key: tdm-bad\r\n"},
      {"a prefix of the key", "Authorization: Bearer tdm-goo\r\n"},
      {"the key's hash itself", absl::StrCat("x-api-key: ", security::Sha256Hex("tdm-good"), "\r\n")},
  };
  for (const Endpoint& e : ProtectedEndpoints()) {
    for (const auto& [what, header] : bad) {
      ExpectUnauthorized(PostWith(e.path, e.body, header), e.anthropic, e.path + " " + what);
    }
  }
  ExpectUnauthorized(Send("GET", "/metrics", ""), false, "/metrics");
  ExpectUnauthorized(Send("GET", "/metrics", "Authorization: Bearer tdm-bad\r\n"), false, "/metrics");
  EXPECT_TRUE(w->calls().empty()) << "a refused request reached a worker";
  // Open without a key: probes and the model list.
  EXPECT_EQ(Send("GET", "/health", "").status, 200);
  EXPECT_EQ(Send("GET", "/ready", "").status, 200);
  EXPECT_EQ(Send("GET", "/v1/models", "").status, 200);
  // The failures are counted by reason.
  EXPECT_GE(Metric("tandem_router_auth_failures_total{reason=\"missing\"}").value_or(0), 6);
  EXPECT_GE(Metric("tandem_router_auth_failures_total{reason=\"malformed\"}").value_or(0), 20);
  EXPECT_GE(Metric("tandem_router_auth_failures_total{reason=\"unknown\"}").value_or(0), 20);
}

TEST_F(SecurityTest, AValidKeyServesEveryEndpointAndNamesItsTrafficClass) {
  StartWithKeys({KeyLine("tdm-agent", "acme", json::object(), "agent"), KeyLine("tdm-plain", "beta")});
  FakeWorker* w = AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids(" there")});
  for (const Endpoint& e : ProtectedEndpoints()) {
    SCOPED_TRACE(e.path);
    RawResponse r = PostWith(e.path, e.body, "Authorization: Bearer tdm-agent\r\n");
    EXPECT_EQ(r.status, 200) << r.body;
    r = PostWith(e.path, e.body, "x-api-key: tdm-plain\r\n");
    EXPECT_EQ(r.status, 200) << r.body;
  }
  ASSERT_EQ(PostWith("/v1/completions", kCompletion, "Authorization: bearer tdm-agent\r\n").status, 200);
  EXPECT_EQ(w->last_generate().traffic_class(), "agent");
  ASSERT_EQ(PostWith("/v1/completions", kCompletion, "x-api-key: tdm-plain\r\n").status, 200);
  EXPECT_EQ(w->last_generate().traffic_class(), "");
  ASSERT_EQ(PostWith("/v1/completions", kCompletion,
                     "x-api-key: tdm-agent\r\nX-Tandem-Traffic-Class: chat\r\n").status, 200);
  EXPECT_EQ(w->last_generate().traffic_class(), "chat") << "the header still overrides";
  EXPECT_EQ(Send("GET", "/metrics", "Authorization: Bearer tdm-plain\r\n").status, 200);
  // Metrics name tenants, never keys.
  const std::string text = router_->metrics_registry().RenderText();
  EXPECT_NE(text.find("tenant=\"acme\""), std::string::npos);
  EXPECT_EQ(text.find("tdm-"), std::string::npos);
  EXPECT_EQ(text.find(security::Sha256Hex("tdm-agent").substr(0, 12)), std::string::npos);
}

TEST_F(SecurityTest, SighupReloadAddsAndRevokesKeysWhileARevokedKeysStreamFinishes) {
  StartWithKeys({KeyLine("tdm-old", "acme")});
  AddWorker("w1", v1::WORKER_ROLE_COMBINED,
            {.tokens = Ids(" once upon a time"), .token_delay = milliseconds(30)});
  RawResponse head;
  json body = kCompletion;
  body["max_tokens"] = 12;
  body["stream"] = true;
  auto stream = OpenStreamWith("/v1/completions", body, "Authorization: Bearer tdm-old\r\n", &head);
  ASSERT_EQ(head.status, 200);
  ASSERT_TRUE(stream->ReadEvent(milliseconds(5000)).has_value());

  WriteKeys({KeyLine("tdm-new", "acme")});
  ASSERT_TRUE(router_->ReloadApiKeys().ok());
  ExpectUnauthorized(PostWith("/v1/completions", kCompletion, "Authorization: Bearer tdm-old\r\n"),
                     false, "revoked");
  EXPECT_EQ(PostWith("/v1/completions", kCompletion, "Authorization: Bearer tdm-new\r\n").status, 200);
  // The revoked key's stream runs to its end.
  std::vector<std::string> events;
  while (auto event = stream->ReadEvent(milliseconds(5000))) {
    events.push_back(*event);
    if (*event == "data: [DONE]") break;
  }
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "data: [DONE]");
  EXPECT_GE(events.size(), 12u) << "11 more tokens, then [DONE]";

  // A broken file keeps the keys in force.
  WriteKeys({"{not json"});
  EXPECT_FALSE(router_->ReloadApiKeys().ok());
  EXPECT_EQ(PostWith("/v1/completions", kCompletion, "Authorization: Bearer tdm-new\r\n").status, 200);
  ExpectNothingInFlight();
}

TEST_F(SecurityTest, RequestsPerMinuteWithAFakeClockAndOpenAiHeaders) {
  StartWithKeys({KeyLine("tdm-a", "acme", {{"requests_per_minute", 2}})});
  AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids(" there")});
  const std::string key = "Authorization: Bearer tdm-a\r\n";
  RawResponse r = PostWith("/v1/completions", kCompletion, key);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("x-ratelimit-limit-requests"), "2");
  EXPECT_EQ(r.Header("x-ratelimit-remaining-requests"), "1");
  EXPECT_EQ(r.Header("x-ratelimit-reset-requests"), "30s");
  r = PostWith("/v1/chat/completions", kChat, key);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("x-ratelimit-remaining-requests"), "0");
  EXPECT_EQ(r.Header("x-ratelimit-reset-requests"), "1m0s");
  r = PostWith("/v1/completions", kCompletion, key);
  ASSERT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(r.Header("retry-after"), "30");
  EXPECT_EQ(r.Header("x-ratelimit-remaining-requests"), "0");
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "rate_limit_exceeded");
  Advance(milliseconds(29000));
  r = PostWith("/v1/chat/completions", kChat, key);
  ASSERT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(r.Header("retry-after"), "1");
  Advance(milliseconds(1000));
  EXPECT_EQ(PostWith("/v1/completions", kCompletion, key).status, 200);
  EXPECT_EQ(Metric("tandem_router_tenant_rate_limited_total{tenant=\"acme\",limit=\"requests_per_minute\",scope=\"key\"}"), 2.0);
  EXPECT_EQ(Metric("tandem_router_tenant_requests_total{tenant=\"acme\"}"), 3.0);
}

TEST_F(SecurityTest, TokensPerMinuteAreReservedAtAdmissionAndSettledAtTheEnd) {
  // The byte tokenizer: "Hi" is BOS + 2 = 3 prompt tokens; the worker answers 2 tokens.
  StartWithKeys({KeyLine("tdm-a", "acme", {{"tokens_per_minute", 100}})});
  AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids(" t")});
  const std::string key = "Authorization: Bearer tdm-a\r\n";
  json big = kCompletion;
  big["max_tokens"] = 40;
  RawResponse r = PostWith("/v1/completions", big, key);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Header("x-ratelimit-limit-tokens"), "100");
  EXPECT_EQ(r.Header("x-ratelimit-remaining-tokens"), "57") << "43 reserved: 3 prompt + 40";
  // Settled at 3 + 2 = 5 used: the next one sees 95 before its own 43.
  r = PostWith("/v1/completions", big, key);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Header("x-ratelimit-remaining-tokens"), "52");
  EXPECT_EQ(Metric("tandem_router_tenant_tokens_total{tenant=\"acme\"}"), 10.0);
  EXPECT_EQ(Metric("tandem_router_tenant_tokens_reserved{tenant=\"acme\"}"), 0.0);
  // 90 left: a request for 93 waits for 3 tokens (1.8 s at 100/min).
  big["max_tokens"] = 90;
  r = PostWith("/v1/completions", big, key);
  ASSERT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(r.Header("retry-after"), "2");
  EXPECT_EQ(r.Header("x-ratelimit-remaining-tokens"), "90");
  Advance(milliseconds(1800));
  EXPECT_EQ(PostWith("/v1/completions", big, key).status, 200);
  // More than a minute's worth can never pass.
  big["max_tokens"] = 200;
  r = PostWith("/v1/completions", big, key);
  ASSERT_EQ(r.status, 429);
  EXPECT_NE(json::parse(r.body)["error"]["message"].get<std::string>().find("too large"),
            std::string::npos);
}

TEST_F(SecurityTest, TenantLimitsAreSharedByItsKeysAndAnthropicHeadersOnMessages) {
  StartWithKeys({KeyLine("tdm-a", "acme"), KeyLine("tdm-b", "acme"), KeyLine("tdm-c", "other"),
                 json{{"tenant", "acme"}, {"limits", {{"requests_per_minute", 3}}}}.dump()});
  AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids(" there")});
  RawResponse r = PostWith("/v1/messages", kMessages, "x-api-key: tdm-a\r\n");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Header("anthropic-ratelimit-requests-limit"), "3");
  EXPECT_EQ(r.Header("anthropic-ratelimit-requests-remaining"), "2");
  EXPECT_NE(r.Header("anthropic-ratelimit-requests-reset").find('T'), std::string::npos);
  EXPECT_EQ(PostWith("/v1/messages", kMessages, "x-api-key: tdm-b\r\n").status, 200);
  EXPECT_EQ(PostWith("/v1/messages", kMessages, "x-api-key: tdm-a\r\n").status, 200);
  r = PostWith("/v1/messages", kMessages, "x-api-key: tdm-b\r\n");
  ASSERT_EQ(r.status, 429) << r.body;
  const json body = json::parse(r.body);
  EXPECT_EQ(body["type"], "error");
  EXPECT_EQ(body["error"]["type"], "rate_limit_error");
  EXPECT_EQ(r.Header("retry-after"), "20");
  EXPECT_EQ(r.Header("anthropic-ratelimit-requests-remaining"), "0");
  // Another tenant is not affected.
  EXPECT_EQ(PostWith("/v1/messages", kMessages, "x-api-key: tdm-c\r\n").status, 200);
  EXPECT_EQ(Metric("tandem_router_tenant_limit{tenant=\"acme\",limit=\"requests_per_minute\"}"), 3.0);
  EXPECT_EQ(Metric("tandem_router_tenant_rate_limited_total{tenant=\"acme\",limit=\"requests_per_minute\",scope=\"tenant\"}"), 1.0);
}

TEST_F(SecurityTest, ConcurrentStreamsUnderABurstAreRefusedBeforeAnyByte) {
  StartWithKeys({KeyLine("tdm-a", "acme", {{"concurrent_streams", 3}})});
  // Each stream sends one token and then holds until cancelled.
  AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids(" there friend"), .hang_after = 1});
  json body = kChat;
  body["stream"] = true;
  body["max_tokens"] = 10;
  constexpr int kBurst = 12;
  std::vector<std::unique_ptr<RawClient>> clients(kBurst);
  std::vector<RawResponse> heads(kBurst);
  std::vector<std::thread> threads;
  for (int i = 0; i < kBurst; ++i) {
    threads.emplace_back([&, i] {
      clients[i] = OpenStreamWith("/v1/chat/completions", body, "Authorization: Bearer tdm-a\r\n",
                                  &heads[i]);
    });
  }
  for (std::thread& t : threads) t.join();
  int served = 0, refused = 0;
  for (int i = 0; i < kBurst; ++i) {
    if (heads[i].status == 200) {
      ++served;
    } else {
      ++refused;
      EXPECT_EQ(heads[i].status, 429);
      EXPECT_EQ(heads[i].Header("retry-after"), "1");
      EXPECT_NE(heads[i].Header("content-type").find("application/json"), std::string::npos)
          << "refused before the stream opened";
    }
  }
  EXPECT_EQ(served, 3);
  EXPECT_EQ(refused, kBurst - 3);
  EXPECT_EQ(Metric("tandem_router_tenant_active_streams{tenant=\"acme\"}"), 3.0);
  EXPECT_EQ(Metric("tandem_router_tenant_rate_limited_total{tenant=\"acme\",limit=\"concurrent_streams\",scope=\"key\"}"),
            static_cast<double>(kBurst - 3));
  // Closing the streams frees their places.
  clients.clear();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (Metric("tandem_router_tenant_active_streams{tenant=\"acme\"}") != 0.0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(Metric("tandem_router_tenant_active_streams{tenant=\"acme\"}"), 0.0);
  RawResponse head;
  auto again = OpenStreamWith("/v1/chat/completions", body, "Authorization: Bearer tdm-a\r\n", &head);
  EXPECT_EQ(head.status, 200);
  again.reset();
}

TEST_F(SecurityTest, MetricsOnTheirOwnListenerNeedNoKeyAndLeaveThePublicOne) {
  StartWithKeys({KeyLine("tdm-a", "acme")}, [](RouterConfig* c) { c->metrics_listen = "127.0.0.1:0"; });
  ASSERT_NE(router_->metrics_port(), 0);
  auto ops = RawClient::Connect(router_->metrics_port());
  ops->Send("GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  auto r = ops->ReadResponse(milliseconds(5000));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("tandem_router_auth_failures_total"), std::string::npos);
  EXPECT_EQ(Send("GET", "/metrics", "Authorization: Bearer tdm-a\r\n").status, 404);
}

TEST_F(SecurityTest, AnUnreadableOrInvalidKeysFileStopsTheStart) {
  RouterServer::Options options;
  options.config.http_listen = "127.0.0.1:0";
  options.config.control_listen = "127.0.0.1:0";
  options.config.api_keys_file = (dir_ / "absent.jsonl").string();
  options.served_model = "fake-model";
  options.tokenizer = {&tokenizer_, false};
  EXPECT_FALSE(RouterServer::Start(options).ok());
  WriteKeys({R"({"key_sha256": "abc", "tenant": "acme"})"});
  options.config.api_keys_file = keys_file_;
  auto st = RouterServer::Start(options);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("line 2"), std::string::npos) << st.status();
}

}  // namespace
}  // namespace tandem::router::testing
