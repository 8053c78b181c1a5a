#include "router_fixture.h"

namespace tandem::router::testing {
namespace {

// The calls one request made on a worker, in order, with the request id elided.
std::vector<std::string> CallNames(const FakeWorker& w) {
  std::vector<std::string> names;
  for (const std::string& c : w.calls()) names.push_back(c.substr(0, c.find(' ')));
  return names;
}

TEST_F(RouterTest, DisaggregatedRequestReservesPrefillsThenDecodes) {
  StartRouter();
  FakeWorker* p = AddWorker("p1", v1::WORKER_ROLE_PREFILL,
                            {.first_token = Ids("A")[0], .cached_prompt_tokens = 2, .kv_bytes = 12345});
  FakeWorker* d = AddWorker("d1", v1::WORKER_ROLE_DECODE, {.tokens = Ids("BCDEFG")});
  RawResponse r = Post("/v1/completions",
                       {{"prompt", "hello"}, {"max_tokens", 4}, {"return_token_ids", true}, {"seed", 42}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = json::parse(r.body);
  const std::string id = body["id"];
  EXPECT_EQ(body["choices"][0]["text"], "ABCD");
  EXPECT_EQ(body["choices"][0]["token_ids"].get<std::vector<std::int32_t>>(), Ids("ABCD"));
  EXPECT_EQ(body["usage"]["completion_tokens"], 4);  // the prefill's first token counts
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 2);

  EXPECT_EQ(d->calls(), (std::vector<std::string>{absl::StrCat("ReserveKv ", id, " 6"),
                                                  absl::StrCat("Generate ", id, " handoff-", id, " ",
                                                               Ids("A")[0])}));
  EXPECT_EQ(p->calls(), (std::vector<std::string>{absl::StrCat("Prefill ", id, " handoff-", id)}));
  // The decode worker's KV target reaches prefill untouched.
  const v1::PrefillRequest prefill = p->last_prefill();
  EXPECT_EQ(prefill.kv_target().decode_worker_id(), "d1");
  EXPECT_EQ(prefill.kv_target().ucx_address(), "opaque-address");
  ASSERT_EQ(prefill.kv_target().blocks_size(), 1);
  EXPECT_EQ(prefill.kv_target().blocks(0).remote_addr(), 0x1000u);
  EXPECT_EQ(prefill.sampling().seed(), 42u);
  EXPECT_EQ(d->last_generate().sampling().seed(), 42u);
  EXPECT_EQ(Metric("tandem_router_kv_handoff_bytes_total"), 12345.0);
  EXPECT_EQ(Metric("tandem_router_kv_handoff_seconds_count"), 1.0);
  ExpectNothingInFlight();
}

TEST_F(RouterTest, DecodeRunsEvenWhenTheFirstTokenEndsTheRequest) {
  StartRouter();
  AddWorker("p1", v1::WORKER_ROLE_PREFILL, {.first_token = Ids("A")[0]});
  FakeWorker* d = AddWorker("d1", v1::WORKER_ROLE_DECODE, {.tokens = Ids("BC")});
  RawResponse head;
  auto events = StreamAll("/v1/completions", {{"prompt", "x"}, {"max_tokens", 1}, {"stream", true}}, &head);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(json::parse(events[0])["choices"][0]["text"], "A");
  EXPECT_EQ(CallNames(*d), (std::vector<std::string>{"ReserveKv", "Generate"}));
}

TEST_F(RouterTest, DecodeRunsEvenWhenTheFirstTokenIsAStopToken) {
  StartRouter(nullptr, nullptr, /*llama2c=*/true);
  AddWorker("p1", v1::WORKER_ROLE_PREFILL, {.first_token = 1});  // BOS: nothing to tell
  FakeWorker* d = AddWorker("d1", v1::WORKER_ROLE_DECODE, {.tokens = Ids("never")});
  RawResponse r = Post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 8}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = json::parse(r.body);
  EXPECT_EQ(body["choices"][0]["text"], "");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["usage"]["completion_tokens"], 1);
  EXPECT_EQ(CallNames(*d), (std::vector<std::string>{"ReserveKv", "Generate"}));
  EXPECT_EQ(d->last_generate().first_token_id(), 1);
}

TEST_F(RouterTest, APrefillDecodePairIsPreferredOverACombinedWorker) {
  StartRouter();
  FakeWorker* c = AddWorker("c1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("cc")});
  FakeWorker* p = AddWorker("p1", v1::WORKER_ROLE_PREFILL, {.first_token = Ids("p")[0]});
  FakeWorker* d = AddWorker("d1", v1::WORKER_ROLE_DECODE, {.tokens = Ids("dd")});
  ASSERT_EQ(Post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 3}}).status, 200);
  EXPECT_TRUE(c->calls().empty());
  EXPECT_EQ(CallNames(*p), (std::vector<std::string>{"Prefill"}));
  EXPECT_EQ(CallNames(*d), (std::vector<std::string>{"ReserveKv", "Generate"}));
}

TEST_F(RouterTest, PrefillFailureCancelsTheDecodeReservation) {
  StartRouter();
  AddWorker("p1", v1::WORKER_ROLE_PREFILL, {.prefill_status = grpc::StatusCode::INTERNAL});
  FakeWorker* d = AddWorker("d1", v1::WORKER_ROLE_DECODE, {.tokens = Ids("x")});
  RawResponse r = Post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 3}});
  EXPECT_EQ(r.status, 502) << r.body;
  EXPECT_TRUE(json::parse(r.body)["error"].contains("message"));
  // The Cancel is sent without waiting for it: the client's answer may come first.
  ASSERT_TRUE(d->WaitForCall("Cancel", milliseconds(5000)));
  EXPECT_EQ(CallNames(*d), (std::vector<std::string>{"ReserveKv", "Cancel"}));
  ExpectNothingInFlight();
}

TEST_F(RouterTest, LeastLoadedWorkerIsChosen) {
  StartRouter();
  FakeWorker* a = AddWorker("a", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("a")});
  FakeWorker* b = AddWorker("b", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("b")});
  ASSERT_FALSE(control_->Heartbeat(a->Info(), /*running=*/5, /*waiting=*/1));
  ASSERT_FALSE(control_->Heartbeat(b->Info(), /*running=*/1, /*waiting=*/0));
  EXPECT_EQ(json::parse(Post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 1}}).body)["choices"][0]["text"], "b");
  ASSERT_FALSE(control_->Heartbeat(a->Info(), 0, 0));
  ASSERT_FALSE(control_->Heartbeat(b->Info(), 0, 3));
  EXPECT_EQ(json::parse(Post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 1}}).body)["choices"][0]["text"], "a");
}

TEST_F(RouterTest, TheRoutersOwnInFlightRequestsCountAsLoad) {
  StartRouter();
  FakeWorker* a = AddWorker("a", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("aaaa"), .hang_after = 1});
  FakeWorker* b = AddWorker("b", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("bbbb"), .hang_after = 1});
  // Both idle: the first stream goes to "a" (lowest id) and stays open there.
  RawResponse head;
  auto first = OpenStream("/v1/completions", {{"prompt", "x"}, {"max_tokens", 4}, {"stream", true}}, &head);
  ASSERT_TRUE(a->WaitForCall("Generate", milliseconds(5000)));
  auto second = OpenStream("/v1/completions", {{"prompt", "x"}, {"max_tokens", 4}, {"stream", true}}, &head);
  EXPECT_TRUE(b->WaitForCall("Generate", milliseconds(5000)));
  EXPECT_EQ(Metric("tandem_router_worker_load{worker=\"a\",role=\"combined\"}"), 1.0);
  first->Close();
  second->Close();
  ExpectNothingInFlight();
}

TEST_F(RouterTest, RegistrationChecksBlockSizeAndHeartbeatsAskUnknownWorkersToReregister) {
  StartRouter();
  FakeWorker w("w1", v1::WORKER_ROLE_COMBINED, {});
  grpc::Status refused = control_->Register(w.Info(/*incarnation=*/1, /*block_size=*/32));
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(control_->Heartbeat(w.Info(1)));  // unknown

  v1::RegisterWorkerResponse lease;
  ASSERT_TRUE(control_->Register(w.Info(1), &lease).ok());
  EXPECT_EQ(lease.lease_ms(), 3000u);
  EXPECT_GT(lease.heartbeat_interval_ms(), 0u);
  EXPECT_LT(lease.heartbeat_interval_ms(), lease.lease_ms());
  EXPECT_FALSE(control_->Heartbeat(w.Info(1)));
  EXPECT_TRUE(control_->Heartbeat(w.Info(2)));  // a restarted process: stale incarnation
}

TEST_F(RouterTest, AWorkerRestartMigratesItsOldRequestsButReRegisteringDoesNot) {
  StartRouter();
  FakeWorker* w = AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("abc"), .hang_after = 1});
  RawResponse head;
  auto client = OpenStream("/v1/completions", {{"prompt", "x"}, {"max_tokens", 3}, {"stream", true}}, &head);
  ASSERT_TRUE(client->ReadEvent(milliseconds(5000)).has_value());
  // The same process registering again leaves the stream alone...
  ASSERT_TRUE(control_->Register(w->Info(/*incarnation=*/7)).ok());
  EXPECT_FALSE(client->ReadEvent(milliseconds(200)).has_value());
  EXPECT_EQ(Metric("tandem_router_worker_load{worker=\"w1\",role=\"combined\"}"), 1.0);
  // ...a new incarnation means the old process is gone: its requests resume, from the token the
  // client already has, on whatever serves now (here the new process).
  ASSERT_TRUE(control_->Register(w->Info(/*incarnation=*/8)).ok());
  auto event = client->ReadEvent(milliseconds(5000));
  ASSERT_TRUE(event.has_value());
  EXPECT_FALSE(json::parse(event->substr(6)).contains("error")) << *event;
  EXPECT_EQ(Metric("tandem_router_migrations_total"), 1.0);
  EXPECT_EQ(Metric("tandem_router_migrated_tokens_total"), 1.0);
  const v1::GenerateRequest resumed = w->last_generate();
  EXPECT_EQ(resumed.resumed_tokens(), 1u);
  ASSERT_GE(resumed.prompt_token_ids_size(), 2);
  EXPECT_EQ(resumed.prompt_token_ids(resumed.prompt_token_ids_size() - 1), Ids("a")[0]);
  EXPECT_TRUE(router_->registry().IsUp("w1"));
  client->Close();
  ExpectNothingInFlight();
}

TEST_F(RouterTest, PastMaxMigrationsALostGenerationEndsWithAnErrorEvent) {
  StartRouter([](RouterConfig* c) { c->max_migrations = 0; });
  FakeWorker* w = AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("abc"), .hang_after = 1});
  RawResponse head;
  auto client = OpenStream("/v1/completions", {{"prompt", "x"}, {"max_tokens", 3}, {"stream", true}}, &head);
  ASSERT_TRUE(client->ReadEvent(milliseconds(5000)).has_value());
  ASSERT_TRUE(control_->Register(w->Info(/*incarnation=*/8)).ok());
  auto event = client->ReadEvent(milliseconds(5000));
  ASSERT_TRUE(event.has_value());
  EXPECT_TRUE(json::parse(event->substr(6)).contains("error")) << *event;
  EXPECT_EQ(Metric("tandem_router_migrations_total"), 0.0);
  EXPECT_EQ(Metric("tandem_router_migration_failures_total"), 1.0);
  ExpectNothingInFlight();
}

TEST_F(RouterTest, ExpiredLeaseMarksAWorkerDownUntilItsNextHeartbeat) {
  std::atomic<std::int64_t> now_ms{1000000};
  StartRouter([](RouterConfig* c) { c->worker_lease_ms = 3000; },
              [&now_ms] { return std::chrono::steady_clock::time_point(milliseconds(now_ms.load())); });
  EXPECT_EQ(Request("GET", "/ready").status, 503);
  FakeWorker* p = AddWorker("p1", v1::WORKER_ROLE_PREFILL, {.first_token = 70});
  EXPECT_EQ(Request("GET", "/ready").status, 503) << "prefill alone cannot serve";
  FakeWorker* d = AddWorker("d1", v1::WORKER_ROLE_DECODE, {});
  EXPECT_EQ(Request("GET", "/ready").status, 200);

  now_ms += 2000;
  ASSERT_FALSE(control_->Heartbeat(p->Info()));
  now_ms += 2000;  // d1 silent for 4 s
  RawResponse not_ready = Request("GET", "/ready");
  EXPECT_EQ(not_ready.status, 503);
  EXPECT_TRUE(absl::StrContains(not_ready.body, "0 decode")) << not_ready.body;
  EXPECT_FALSE(router_->registry().IsUp("d1"));
  EXPECT_EQ(Metric("tandem_router_worker_up{worker=\"d1\",role=\"decode\"}"), 0.0);
  RawResponse refused = Post("/v1/completions", {{"prompt", "x"}});
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.Header("retry-after"), "1");

  ASSERT_FALSE(control_->Heartbeat(d->Info()));
  EXPECT_EQ(Request("GET", "/ready").status, 200);
  EXPECT_EQ(Metric("tandem_router_worker_up{worker=\"d1\",role=\"decode\"}"), 1.0);
  ExpectNothingInFlight();
}

}  // namespace
}  // namespace tandem::router::testing
