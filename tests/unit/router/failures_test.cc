#include "router_fixture.h"

namespace tandem::router::testing {
namespace {

using Clock = std::chrono::steady_clock;

TEST_F(RouterTest, WorkerDyingMidStreamEndsTheStreamWithAnErrorAndMarksItDown) {
  StartRouter();
  FakeWorker* w = AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("abcdef"), .hang_after = 2});
  RawResponse head;
  auto client = OpenStream("/v1/completions", {{"prompt", "x"}, {"max_tokens", 6}, {"stream", true}}, &head);
  ASSERT_EQ(head.status, 200);
  std::string text;
  while (text.size() < 2) {
    auto event = client->ReadEvent(milliseconds(5000));
    ASSERT_TRUE(event.has_value());
    text += json::parse(event->substr(6))["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, "ab");

  const auto killed_at = Clock::now();
  w->Kill();
  auto event = client->ReadEvent(milliseconds(5000));
  ASSERT_TRUE(event.has_value()) << "no error event within 5 s";
  EXPECT_LT(Clock::now() - killed_at, std::chrono::seconds(5));
  const json error = json::parse(event->substr(6));
  ASSERT_TRUE(error.contains("error")) << *event;
  EXPECT_TRUE(error["error"].contains("message"));
  // The stream then ends: [DONE], then the chunked body's terminal chunk (not a timeout).
  EXPECT_EQ(client->ReadEvent(milliseconds(5000)), "data: [DONE]");
  EXPECT_EQ(client->ReadChunk(milliseconds(5000)), "") << "the stream did not end";
  EXPECT_FALSE(router_->registry().IsUp("w1"));
  EXPECT_EQ(Request("GET", "/ready").status, 503);
  ExpectNothingInFlight();
}

TEST_F(RouterTest, SilentWorkerMidStreamIsCutOffWhenItsLeaseExpires) {
  std::atomic<std::int64_t> now_ms{1000000};
  StartRouter([](RouterConfig* c) { c->worker_lease_ms = 3000; },
              [&now_ms] { return std::chrono::steady_clock::time_point(milliseconds(now_ms.load())); });
  FakeWorker* w = AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("abc"), .hang_after = 1});
  RawResponse head;
  auto client = OpenStream("/v1/completions", {{"prompt", "x"}, {"max_tokens", 3}, {"stream", true}}, &head);
  ASSERT_TRUE(client->ReadEvent(milliseconds(5000)).has_value());
  ASSERT_TRUE(w->WaitForCall("Generate", milliseconds(5000)));
  now_ms += 3001;  // the worker hangs without closing its connection, and stops heartbeating
  auto event = client->ReadEvent(milliseconds(5000));
  ASSERT_TRUE(event.has_value());
  EXPECT_TRUE(json::parse(event->substr(6)).contains("error")) << *event;
  EXPECT_FALSE(router_->registry().IsUp("w1"));
  ExpectNothingInFlight();
}

TEST_F(RouterTest, UnavailableWorkerAnswers503AndIsMarkedDown) {
  StartRouter();
  AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.generate_status = grpc::StatusCode::UNAVAILABLE});
  RawResponse r = Post("/v1/completions", {{"prompt", "x"}});
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_TRUE(json::parse(r.body)["error"]["message"].is_string());
  EXPECT_FALSE(router_->registry().IsUp("w1"));
  ExpectNothingInFlight();
}

TEST_F(RouterTest, ClientDisconnectCancelsTheWorkers) {
  StartRouter();
  FakeWorker* p = AddWorker("p1", v1::WORKER_ROLE_PREFILL, {.first_token = Ids("a")[0]});
  FakeWorker* d = AddWorker("d1", v1::WORKER_ROLE_DECODE, {.tokens = Ids("bcdef"), .hang_after = 1});
  RawResponse head;
  auto client = OpenStream("/v1/completions", {{"prompt", "x"}, {"max_tokens", 6}, {"stream", true}}, &head);
  ASSERT_EQ(head.status, 200);
  ASSERT_TRUE(client->ReadEvent(milliseconds(5000)).has_value());
  ASSERT_TRUE(d->WaitForCall("Generate", milliseconds(5000)));
  client->Close();
  EXPECT_TRUE(d->WaitForCall("Cancel", milliseconds(5000)));
  EXPECT_TRUE(p->WaitForCall("Cancel", milliseconds(5000)));
  EXPECT_TRUE(router_->registry().IsUp("d1")) << "a client leaving says nothing about the worker";
  ExpectNothingInFlight();
}

TEST_F(RouterTest, NonStreamGenerationsHoldNoIoThreadAndStopWhenTheClientLeaves) {
  StartRouter([](RouterConfig* c) { c->http_io_threads = 1; });
  FakeWorker* w = AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("abc"), .hang_after = 1});
  auto client = RawClient::Connect(router_->http_port());
  const std::string body = json{{"prompt", "x"}, {"max_tokens", 3}}.dump();
  ASSERT_TRUE(client->Send(absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: ",
                                        body.size(), "\r\n\r\n", body)));
  ASSERT_TRUE(w->WaitForCall("Generate", milliseconds(5000)));
  // The only I/O thread is free while the generation waits on the worker.
  EXPECT_EQ(Request("GET", "/health", "", milliseconds(2000)).status, 200);
  EXPECT_EQ(Metric("tandem_router_active_requests"), 1.0);
  client->Close();
  EXPECT_TRUE(w->WaitForCall("Cancel", milliseconds(5000)));
  ExpectNothingInFlight();
}

// A worker that stays full: the request waits at the head of the queue and is retried as places
// free up, and only past --max-queue-wait does the client get 429, before any stream byte.
TEST_F(RouterTest, WorkerOverloadIsRetriedThenAnswered429WithRetryAfter) {
  StartRouter([](RouterConfig* c) { c->max_queue_wait_ms = 400; });
  FakeWorker* w = AddWorker("w1", v1::WORKER_ROLE_COMBINED,
                            {.generate_status = grpc::StatusCode::RESOURCE_EXHAUSTED});
  RawResponse r = Post("/v1/completions", {{"prompt", "x"}});
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_GE(std::stol(r.Header("retry-after")), 1);
  int generate_calls = 0;
  for (const std::string& c : w->calls()) generate_calls += c.rfind("Generate", 0) == 0;
  EXPECT_GE(generate_calls, 2);
  EXPECT_GE(Metric("tandem_router_worker_capacity_refusals_total").value_or(0), 2.0);
  EXPECT_EQ(Metric("tandem_router_admission_refusals_total{reason=\"worker_capacity\"}"), 1.0);
  EXPECT_TRUE(router_->registry().IsUp("w1"));
  ExpectNothingInFlight();
}

// Refusals for capacity before the first token never reach the client while a retry can succeed.
TEST_F(RouterTest, AWorkerThatRefusesForCapacityThenAcceptsServesTheRequest) {
  StartRouter();
  FakeWorker* w = AddWorker("w1", v1::WORKER_ROLE_COMBINED,
                            {.tokens = Ids("ok"), .refuse_first_generates = 3});
  RawResponse head;
  const std::vector<std::string> events =
      StreamAll("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}, {"stream", true}}, &head);
  EXPECT_EQ(head.status, 200);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  int generate_calls = 0;
  for (const std::string& c : w->calls()) generate_calls += c.rfind("Generate", 0) == 0;
  EXPECT_EQ(generate_calls, 4);
  EXPECT_EQ(Metric("tandem_router_worker_capacity_refusals_total"), 3.0);
  ExpectNothingInFlight();
}

// A worker's own DEADLINE_EXCEEDED, long before the request's deadline, loses the attempt, not the
// request: the stream resumes elsewhere from the tokens already sent.
TEST_F(RouterTest, AWorkersOwnDeadlineMigratesTheGenerationInsteadOfFailingIt) {
  StartRouter();
  AddWorker("p", v1::WORKER_ROLE_PREFILL, {.first_token = Ids("o")[0]});
  AddWorker("d", v1::WORKER_ROLE_DECODE, {.tokens = Ids("k"), .expire_first_generates = 1});
  RawResponse head;
  const std::vector<std::string> events =
      StreamAll("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}, {"stream", true}}, &head);
  EXPECT_EQ(head.status, 200);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  for (const std::string& e : events) EXPECT_EQ(e.find("error"), std::string::npos) << e;
  EXPECT_EQ(Metric("tandem_router_migrations_total"), 1.0);
  ExpectNothingInFlight();
}

// A worker that began draining before its heartbeat reached the router refuses new work with the
// draining trailer: the request is placed on another worker (no migration, no error, nothing on
// the draining one), and the router stops choosing that worker at once, without marking it down.
class DrainRefusalTest : public RouterTest, public ::testing::WithParamInterface<bool> {};

TEST_P(DrainRefusalTest, NewWorkRefusedByADrainingWorkerGoesElsewhereAndNothingMoreGoesThere) {
  const bool disaggregated = GetParam();
  StartRouter();
  FakeWorker* draining;
  if (disaggregated) {
    AddWorker("p", v1::WORKER_ROLE_PREFILL, {.first_token = Ids("o")[0]});
    draining = AddWorker("d1", v1::WORKER_ROLE_DECODE, {.tokens = Ids("k"), .refuse_as_draining = true});
    AddWorker("d2", v1::WORKER_ROLE_DECODE, {.tokens = Ids("k")});
  } else {
    draining = AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("ok"), .refuse_as_draining = true});
    AddWorker("w2", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("ok")});
  }
  const auto serve_one = [&](int i) {
    RawResponse head;
    const std::vector<std::string> events = StreamAll(
        "/v1/completions",
        {{"prompt", absl::StrCat("request ", i)}, {"max_tokens", 2}, {"stream", true}}, &head);
    EXPECT_EQ(head.status, 200);
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back(), "[DONE]");
    for (const std::string& e : events) EXPECT_EQ(e.find("error"), std::string::npos) << e;
  };
  int sent = 0;
  while (draining->calls().empty() && sent < 16) serve_one(sent++);
  ASSERT_FALSE(draining->calls().empty()) << "the router never chose the draining worker";
  const std::size_t calls_seen = draining->calls().size();
  for (int i = 0; i < 6; ++i) serve_one(sent++);
  EXPECT_EQ(draining->calls().size(), calls_seen) << "new work still went to the draining worker";
  EXPECT_EQ(Metric("tandem_router_drain_refusals_total"), 1.0);
  EXPECT_EQ(Metric("tandem_router_migrations_total"), 0.0);
  ExpectNothingInFlight();
}

INSTANTIATE_TEST_SUITE_P(Roles, DrainRefusalTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Disaggregated" : "Combined";
                         });

TEST_F(RouterTest, StreamsFailingBeforeTheFirstTokenGetTheirOwnStatus) {
  StartRouter([](RouterConfig* c) { c->max_queue_wait_ms = 200; });
  AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.generate_status = grpc::StatusCode::RESOURCE_EXHAUSTED});
  RawResponse head;
  auto client = OpenStream("/v1/completions", {{"prompt", "x"}, {"stream", true}}, &head);
  EXPECT_EQ(head.status, 429);
  EXPECT_FALSE(head.Header("retry-after").empty());
  EXPECT_EQ(head.Header("content-type"), "application/json");
  workers_.clear();
  AddWorker("w2", v1::WORKER_ROLE_COMBINED, {.generate_status = grpc::StatusCode::UNAVAILABLE});
  client = OpenStream("/v1/chat/completions",
                      {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"stream", true}}, &head);
  EXPECT_EQ(head.status, 503);
  ExpectNothingInFlight();
}

TEST_F(RouterTest, BeyondMaxInFlightRequestsQueueAndAreServedInTurn) {
  StartRouter([](RouterConfig* c) { c->max_in_flight = 1; });
  FakeWorker* w = AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("abc"), .hang_after = 1});
  RawResponse head;
  auto holder = OpenStream("/v1/completions", {{"prompt", "x"}, {"max_tokens", 3}, {"stream", true}}, &head);
  ASSERT_TRUE(w->WaitForCall("Generate", milliseconds(5000)));
  RawResponse queued;
  std::thread waiter([&] { queued = Post("/v1/completions", {{"prompt", "y"}, {"max_tokens", 1}}); });
  // It waits in the router's queue, not on the worker, until the holder's place frees.
  const auto deadline = std::chrono::steady_clock::now() + milliseconds(5000);
  while (Metric("tandem_router_queue_depth").value_or(0) < 1.0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_EQ(Metric("tandem_router_queue_depth"), 1.0);
  int generate_calls = 0;
  for (const std::string& c : w->calls()) generate_calls += c.rfind("Generate", 0) == 0;
  EXPECT_EQ(generate_calls, 1);
  holder->Close();
  waiter.join();
  EXPECT_EQ(queued.status, 200) << queued.body;
  ExpectNothingInFlight();
}

TEST_F(RouterTest, AFullAdmissionQueueAnswers429BeforeAnyStreamByte) {
  StartRouter([](RouterConfig* c) {
    c->max_in_flight = 1;
    c->max_queue_length = 0;
  });
  FakeWorker* w = AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("abc"), .hang_after = 1});
  RawResponse head;
  auto holder = OpenStream("/v1/completions", {{"prompt", "x"}, {"max_tokens", 3}, {"stream", true}}, &head);
  ASSERT_TRUE(w->WaitForCall("Generate", milliseconds(5000)));
  RawResponse refused;
  auto second = OpenStream("/v1/completions", {{"prompt", "x"}, {"stream", true}}, &refused);
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(refused.Header("content-type"), "application/json");
  EXPECT_FALSE(refused.Header("retry-after").empty());
  RawResponse r = Post("/v1/completions", {{"prompt", "x"}});
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["type"], "rate_limit_error");
  EXPECT_EQ(Metric("tandem_router_admission_refusals_total{reason=\"queue_full\"}"), 2.0);
  holder->Close();
  ExpectNothingInFlight();
}

TEST_F(RouterTest, RequestTimeoutIsEnforced) {
  StartRouter([](RouterConfig* c) { c->request_timeout_ms = 300; });
  AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("abc"), .hang_after = 1});
  const auto start = Clock::now();
  RawResponse r = Post("/v1/completions", {{"prompt", "x"}});
  EXPECT_EQ(r.status, 504) << r.body;
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  ExpectNothingInFlight();
}

TEST_F(RouterTest, ShutdownEndsGenerationsInFlightAndTellsTheWorkers) {
  StartRouter();
  FakeWorker* w = AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("abc"), .hang_after = 1});
  RawResponse head;
  auto stream = OpenStream("/v1/completions", {{"prompt", "x"}, {"max_tokens", 3}, {"stream", true}}, &head);
  ASSERT_TRUE(stream->ReadEvent(milliseconds(5000)).has_value());
  auto plain = RawClient::Connect(router_->http_port());
  const std::string body = json{{"prompt", "y"}, {"max_tokens", 3}}.dump();
  ASSERT_TRUE(plain->Send(absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: ",
                                       body.size(), "\r\n\r\n", body)));
  const auto start = Clock::now();
  while (w->calls().size() < 2 && Clock::now() - start < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  router_->Shutdown(absl::ZeroDuration());
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  auto answer = plain->ReadResponse(milliseconds(2000));
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status, 503);
  EXPECT_TRUE(w->WaitForCall("Cancel", milliseconds(2000)));
  EXPECT_EQ(router_->active_requests(), 0);
}

TEST_F(RouterTest, NoWorkersAnswers503) {
  StartRouter();
  RawResponse r = Post("/v1/completions", {{"prompt", "x"}});
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(r.Header("retry-after"), "1");
  ExpectNothingInFlight();
}

struct InvalidCase {
  std::string name;
  std::string path;
  std::string body;
  int status;
  // Empty: not checked. Chat errors follow deepseek-recipe, which (like DeepSeek's API) names the
  // field in the message and leaves param null.
  std::string param;
};

class ValidationTest : public RouterTest, public ::testing::WithParamInterface<InvalidCase> {};

TEST_P(ValidationTest, AnswersTheRightErrorAndLeaksNothing) {
  StartRouter();
  FakeWorker* w = AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("abc")}, /*max_context=*/32);
  const InvalidCase& c = GetParam();
  RawResponse r = Request("POST", c.path, c.body);
  EXPECT_EQ(r.status, c.status) << r.body;
  const json body = json::parse(r.body, nullptr, false);
  ASSERT_FALSE(body.is_discarded()) << r.body;
  ASSERT_TRUE(body.contains("error")) << r.body;
  EXPECT_TRUE(body["error"]["message"].is_string());
  EXPECT_TRUE(body["error"]["type"].is_string());
  EXPECT_TRUE(body["error"].contains("code"));
  if (!c.param.empty()) {
    EXPECT_EQ(body["error"]["param"], c.param) << r.body;
  }
  EXPECT_TRUE(w->calls().empty()) << "an invalid request reached a worker";
  ExpectNothingInFlight();
}

const std::string kChat = "/v1/chat/completions";
const std::string kCmpl = "/v1/completions";

INSTANTIATE_TEST_SUITE_P(
    Cases, ValidationTest,
    ::testing::Values(
        InvalidCase{"MalformedJson", kCmpl, R"({"prompt": "x",)", 400, ""},
        InvalidCase{"NotAnObject", kCmpl, R"([1, 2])", 400, ""},
        InvalidCase{"PromptWrongType", kCmpl, R"({"prompt": 5})", 400, "prompt"},
        InvalidCase{"PromptMissing", kCmpl, R"({"max_tokens": 3})", 400, "prompt"},
        InvalidCase{"PromptIdOutOfVocab", kCmpl, R"({"prompt": [1, 9999]})", 400, "prompt"},
        InvalidCase{"MaxTokensWrongType", kCmpl, R"({"prompt": "x", "max_tokens": "5"})", 400, "max_tokens"},
        InvalidCase{"MaxTokensZero", kCmpl, R"({"prompt": "x", "max_tokens": 0})", 400, "max_tokens"},
        InvalidCase{"BeyondContext", kCmpl, R"({"prompt": "hello", "max_tokens": 27})", 400, "max_tokens"},
        InvalidCase{"PromptFillsContext", kCmpl, R"({"prompt": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32]})", 400, "prompt"},
        InvalidCase{"NMoreThanOne", kCmpl, R"({"prompt": "x", "n": 2})", 400, "n"},
        InvalidCase{"Echo", kCmpl, R"({"prompt": "x", "echo": true})", 400, "echo"},
        InvalidCase{"Logprobs", kCmpl, R"({"prompt": "x", "logprobs": 2})", 400, "logprobs"},
        InvalidCase{"NegativeTemperature", kCmpl, R"({"prompt": "x", "temperature": -1})", 400, "temperature"},
        InvalidCase{"TopPZero", kCmpl, R"({"prompt": "x", "top_p": 0})", 400, "top_p"},
        InvalidCase{"TopKNegative", kCmpl, R"({"prompt": "x", "top_k": -5})", 400, "top_k"},
        InvalidCase{"MinPAboveOne", kCmpl, R"({"prompt": "x", "min_p": 1.5})", 400, "min_p"},
        InvalidCase{"PresencePenaltyRange", kCmpl, R"({"prompt": "x", "presence_penalty": 3})", 400, "presence_penalty"},
        InvalidCase{"RepetitionPenaltyZero", kCmpl, R"({"prompt": "x", "repetition_penalty": 0})", 400, "repetition_penalty"},
        InvalidCase{"StopWrongType", kCmpl, R"({"prompt": "x", "stop": [1]})", 400, "stop"},
        InvalidCase{"StreamWrongType", kCmpl, R"({"prompt": "x", "stream": "yes"})", 400, "stream"},
        InvalidCase{"UnknownModel", kCmpl, R"({"prompt": "x", "model": "gpt-9"})", 404, "model"},
        InvalidCase{"ChatMessagesMissing", kChat, R"({"max_tokens": 3})", 400, ""},
        InvalidCase{"ChatMessagesEmpty", kChat, R"({"messages": []})", 400, ""},
        InvalidCase{"ChatMessagesWrongType", kChat, R"({"messages": "hi"})", 400, ""},
        InvalidCase{"ChatBadRole", kChat, R"({"messages": [{"role": "wizard", "content": "hi"}]})", 400, ""},
        InvalidCase{"ChatContentWrongType", kChat, R"({"messages": [{"role": "user", "content": 3}]})", 400, ""},
        InvalidCase{"ChatImagePart", kChat, R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", 400, ""},
        InvalidCase{"ChatUnknownModel", kChat, R"({"messages": [{"role": "user", "content": "hi"}], "model": "x"})", 404, "model"},
        InvalidCase{"ChatN", kChat, R"({"messages": [{"role": "user", "content": "hi"}], "n": 3})", 400, ""}),
    [](const ::testing::TestParamInfo<InvalidCase>& info) { return info.param.name; });

TEST_F(RouterTest, UnknownModelCarriesTheModelNotFoundCode) {
  StartRouter();
  RawResponse r = Post("/v1/completions", {{"prompt", "x"}, {"model", "other"}});
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "model_not_found");
  EXPECT_EQ(Metric("tandem_router_requests_total{endpoint=\"/v1/completions\",status=\"404\"}"), 1.0);
}

}  // namespace
}  // namespace tandem::router::testing
