#include "api/http/traffic_class.h"
#include "router_fixture.h"

namespace tandem::router::testing {
namespace {

std::vector<std::int32_t> Concat(std::vector<std::int32_t> a, const std::vector<std::int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(RouterTest, NonStreamCompletionOnCombinedWorker) {
  StartRouter();
  FakeWorker* w = AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids(" there, friend"),
                                                             .cached_prompt_tokens = 3});
  RawResponse r = Post("/v1/completions", {{"model", "fake-model"},
                                           {"prompt", "Hi"},
                                           {"max_tokens", 6},
                                           {"temperature", 0},
                                           {"return_token_ids", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = json::parse(r.body);
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["model"], "fake-model");
  EXPECT_TRUE(absl::StartsWith(body["id"].get<std::string>(), "cmpl-"));
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["text"], " there");
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_EQ(choice["token_ids"].get<std::vector<std::int32_t>>(), Ids(" there"));
  EXPECT_EQ(choice["prompt_token_ids"].get<std::vector<std::int32_t>>(), Concat({1}, Ids("Hi")));
  EXPECT_EQ(body["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(body["usage"]["completion_tokens"], 6);
  EXPECT_EQ(body["usage"]["total_tokens"], 9);
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 3);
  EXPECT_EQ(body["usage"]["prompt_cache_hit_tokens"], 3);
  EXPECT_EQ(body["usage"]["prompt_cache_miss_tokens"], 0);

  // What the worker was asked: the tokenised prompt (BOS first), sampling, a deadline.
  const v1::GenerateRequest call = w->last_generate();
  EXPECT_EQ(std::vector<std::int32_t>(call.prompt_token_ids().begin(), call.prompt_token_ids().end()),
            Concat({1}, Ids("Hi")));
  EXPECT_EQ(call.sampling().max_tokens(), 6);
  EXPECT_EQ(call.sampling().temperature(), 0.0f);
  EXPECT_EQ(call.handoff_id(), "");
  EXPECT_EQ(call.first_token_id(), -1);
  EXPECT_GT(call.deadline_unix_ms(), 0u);
  EXPECT_EQ(call.request_id(), body["id"]);
  ExpectNothingInFlight();
  EXPECT_EQ(Metric("tandem_router_requests_total{endpoint=\"/v1/completions\",status=\"200\"}"), 1.0);
}

TEST_F(RouterTest, TrafficClassHeaderReachesTheWorkerAndIsValidated) {
  StartRouter();
  FakeWorker* w = AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids(" there")});
  const auto post = [&](const std::string& header) {
    const std::string body = json{{"prompt", "Hi"}, {"max_tokens", 2}}.dump();
    auto client = RawClient::Connect(router_->http_port());
    client->Send(absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: t\r\n", header,
                              "Content-Type: application/json\r\nContent-Length: ", body.size(),
                              "\r\nConnection: close\r\n\r\n", body));
    return client->ReadResponse(milliseconds(10000)).value_or(RawResponse{});
  };
  ASSERT_EQ(post("X-Tandem-Traffic-Class: agent\r\n").status, 200);
  EXPECT_EQ(w->last_generate().traffic_class(), "agent");
  ASSERT_EQ(post("").status, 200);
  EXPECT_EQ(w->last_generate().traffic_class(), "") << "the worker applies its default";
  EXPECT_EQ(post("X-Tandem-Traffic-Class: batch\r\n").status, 400);
}

TEST_F(RouterTest, ApiKeysSelectTheTrafficClassOnEveryEndpoint) {
  StartRouter([](RouterConfig* c) { c->api_key_traffic_classes = "sk-agent=agent, sk-chat=chat"; });
  FakeWorker* w = AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids(" there")});
  const auto post = [&](const std::string& path, const json& body, const std::string& header) {
    const std::string text = body.dump();
    auto client = RawClient::Connect(router_->http_port());
    client->Send(absl::StrCat("POST ", path, " HTTP/1.1\r\nHost: t\r\n", header,
                              "Content-Type: application/json\r\nContent-Length: ", text.size(),
                              "\r\nConnection: close\r\n\r\n", text));
    return client->ReadResponse(milliseconds(10000)).value_or(RawResponse{});
  };
  const json completion = {{"prompt", "Hi"}, {"max_tokens", 2}};
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}};
  ASSERT_EQ(post("/v1/completions", completion, "Authorization: Bearer sk-agent\r\n").status, 200);
  EXPECT_EQ(w->last_generate().traffic_class(), "agent");
  ASSERT_EQ(post("/v1/chat/completions", chat, "Authorization: Bearer sk-agent\r\n").status, 200);
  EXPECT_EQ(w->last_generate().traffic_class(), "agent");
  ASSERT_EQ(post("/v1/chat/completions", chat, "x-api-key: sk-chat\r\n").status, 200);
  EXPECT_EQ(w->last_generate().traffic_class(), "chat");
  // The header wins over the key; an unknown key gets the workers' default.
  ASSERT_EQ(post("/v1/chat/completions", chat,
                 "Authorization: Bearer sk-agent\r\nX-Tandem-Traffic-Class: chat\r\n").status, 200);
  EXPECT_EQ(w->last_generate().traffic_class(), "chat");
  ASSERT_EQ(post("/v1/chat/completions", chat, "Authorization: Bearer sk-other\r\n").status, 200);
  EXPECT_EQ(w->last_generate().traffic_class(), "");
  EXPECT_EQ(post("/v1/chat/completions", chat, "X-Tandem-Traffic-Class: batch\r\n").status, 400);
}

TEST(TrafficClassifierTest, RejectsMalformedKeyLists) {
  EXPECT_FALSE(TrafficClassifier::Parse("k=batch").ok());
  EXPECT_FALSE(TrafficClassifier::Parse("=agent").ok());
  EXPECT_FALSE(TrafficClassifier::Parse("justakey").ok());
  EXPECT_TRUE(TrafficClassifier::Parse("").ok());
}

TEST_F(RouterTest, PromptAsTokenIdsAndAbsentModelMeanTheServedModel) {
  StartRouter();
  FakeWorker* w = AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("ok")});
  RawResponse r = Post("/v1/completions", {{"prompt", {1, 70, 71}}, {"max_tokens", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["choices"][0]["text"], "ok");
  const v1::GenerateRequest call = w->last_generate();
  EXPECT_EQ(std::vector<std::int32_t>(call.prompt_token_ids().begin(), call.prompt_token_ids().end()),
            (std::vector<std::int32_t>{1, 70, 71}));
}

TEST_F(RouterTest, StreamedCompletionEndsWithDoneAndUsage) {
  StartRouter();
  AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("abcdef")});
  RawResponse head;
  auto events = StreamAll("/v1/completions",
                          {{"prompt", "x"}, {"max_tokens", 4}, {"stream", true},
                           {"stream_options", {{"include_usage", true}}}, {"return_token_ids", true}},
                          &head);
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.Header("content-type"), "text/event-stream");
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  std::vector<std::int32_t> ids;
  std::string finish;
  std::optional<json> usage;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json chunk = json::parse(events[i]);
    EXPECT_EQ(chunk["object"], "text_completion");
    if (chunk.contains("usage")) {
      usage = chunk["usage"];
      EXPECT_TRUE(chunk["choices"].empty());
      continue;
    }
    const json& c = chunk["choices"][0];
    text += c["text"].get<std::string>();
    for (std::int32_t id : c["token_ids"]) ids.push_back(id);
    if (i == 0) EXPECT_EQ(c["prompt_token_ids"].get<std::vector<std::int32_t>>(), Concat({1}, Ids("x")));
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  EXPECT_EQ(text, "abcd");
  EXPECT_EQ(ids, Ids("abcd"));
  EXPECT_EQ(finish, "length");
  ASSERT_TRUE(usage.has_value());
  EXPECT_EQ((*usage)["prompt_tokens"], 2);
  EXPECT_EQ((*usage)["completion_tokens"], 4);
  ExpectNothingInFlight();
}

TEST_F(RouterTest, StreamingNeverSplitsAUtf8Character) {
  StartRouter();
  // "é" is two bytes, so two tokens: no chunk may carry half of it.
  AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("aé"), .token_delay = milliseconds(20)});
  RawResponse head;
  auto events = StreamAll("/v1/completions", {{"prompt", "x"}, {"max_tokens", 3}, {"stream", true}}, &head);
  std::string text;
  for (const std::string& e : events) {
    if (e == "[DONE]") break;
    const std::string piece = json::parse(e)["choices"][0]["text"];
    EXPECT_NE(piece, "\xc3");
    text += piece;
  }
  EXPECT_EQ(text, "aé");
}

TEST_F(RouterTest, StopSequenceCutsTheTextAndStopsTheWorker) {
  StartRouter();
  FakeWorker* w = AddWorker("w1", v1::WORKER_ROLE_COMBINED,
                            {.tokens = Ids("one. END two"), .token_delay = milliseconds(5)});
  RawResponse r = Post("/v1/completions",
                       {{"prompt", "x"}, {"max_tokens", 20}, {"stop", {"END", "zzz"}}, {"return_token_ids", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json choice = json::parse(r.body)["choices"][0];
  EXPECT_EQ(choice["text"], "one. ");
  EXPECT_EQ(choice["finish_reason"], "stop");
  EXPECT_EQ(json::parse(r.body)["usage"]["completion_tokens"], 8) << "up to the end of the match";
  // The worker had " two" left to send: the router cancelled its Generate instead of reading on.
  EXPECT_TRUE(w->WaitForCancelledGenerate(json::parse(r.body)["id"], milliseconds(5000)))
      << "the worker was not stopped";

  // Streaming holds back "EN" until it knows whether "END" follows, and never shows it.
  RawResponse head;
  auto events = StreamAll("/v1/completions", {{"prompt", "x"}, {"max_tokens", 20}, {"stop", "END"}, {"stream", true}}, &head);
  std::string text, finish;
  for (const std::string& e : events) {
    if (e == "[DONE]") break;
    const json c = json::parse(e)["choices"][0];
    text += c["text"].get<std::string>();
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  EXPECT_EQ(text, "one. ");
  EXPECT_EQ(finish, "stop");
  EXPECT_TRUE(w->WaitForCancelledGenerate(w->last_generate().request_id(), milliseconds(5000)))
      << "the streaming request's worker was not stopped";
  ExpectNothingInFlight();
}

TEST_F(RouterTest, Llama2cModelsStopOnBosWithoutPrintingIt) {
  StartRouter(nullptr, nullptr, /*llama2c=*/true);
  std::vector<std::int32_t> tokens = Ids("The end.");
  tokens.push_back(1);  // BOS: the story is over
  tokens.push_back(Ids("X")[0]);
  FakeWorker* w = AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = tokens});
  RawResponse r = Post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 50}, {"return_token_ids", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = json::parse(r.body);
  EXPECT_EQ(body["choices"][0]["text"], "The end.");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["choices"][0]["token_ids"].get<std::vector<std::int32_t>>(), Ids("The end."));
  EXPECT_EQ(body["usage"]["completion_tokens"], 9);  // the worker counts the BOS it generated
  const v1::GenerateRequest call = w->last_generate();
  ASSERT_EQ(call.sampling().stop_token_ids_size(), 1);
  EXPECT_EQ(call.sampling().stop_token_ids(0), 1);
  EXPECT_TRUE(call.sampling().ignore_eos());
}

TEST_F(RouterTest, ChatNonStreamRendersMessagesAndAnswersAsAssistant) {
  StartRouter();
  FakeWorker* w = AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("Hello!")});
  RawResponse r = Post("/v1/chat/completions",
                       {{"model", "fake-model"},
                        {"messages", {{{"role", "system"}, {"content", "Be brief."}},
                                      {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Hi"}}}}}}},
                        {"max_completion_tokens", 6}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = json::parse(r.body);
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_TRUE(absl::StartsWith(body["id"].get<std::string>(), "chatcmpl-"));
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "Hello!");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  const v1::GenerateRequest call = w->last_generate();
  EXPECT_EQ(std::vector<std::int32_t>(call.prompt_token_ids().begin(), call.prompt_token_ids().end()),
            Concat({1}, Ids("Be brief.\nHi")));
}

TEST_F(RouterTest, ChatWithoutMaxTokensMayUseTheRestOfTheContext) {
  StartRouter();
  FakeWorker* w = AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("ok")}, /*max_context=*/64);
  RawResponse r = Post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(w->last_generate().sampling().max_tokens(), 64 - 3);
}

TEST_F(RouterTest, ChatReportsTheCombinedWorkersCacheHitsWholeAndStreamed) {
  StartRouter();
  AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("Yes."), .cached_prompt_tokens = 3});
  const json request = {{"messages", {{{"role", "user"}, {"content", "Well?"}}}}, {"max_tokens", 10}};
  RawResponse r = Post("/v1/chat/completions", request);
  ASSERT_EQ(r.status, 200) << r.body;
  const json usage = json::parse(r.body)["usage"];
  EXPECT_EQ(usage["prompt_cache_hit_tokens"], 3) << r.body;
  EXPECT_EQ(usage["prompt_cache_miss_tokens"], usage["prompt_tokens"].get<int>() - 3) << r.body;

  json streamed = request;
  streamed["stream"] = true;
  RawResponse head;
  const auto events = StreamAll("/v1/chat/completions", streamed, &head);
  ASSERT_GE(events.size(), 2u);
  const json last = json::parse(events[events.size() - 2]);  // the final chunk, before [DONE]
  EXPECT_EQ(last["usage"]["prompt_cache_hit_tokens"], 3) << events[events.size() - 2];
}

TEST_F(RouterTest, ChatStreamStartsWithTheRoleAndEndsWithDone) {
  StartRouter();
  AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("Yes.")});
  RawResponse head;
  auto events = StreamAll("/v1/chat/completions",
                          {{"messages", {{{"role", "user"}, {"content", "Well?"}}}},
                           {"max_tokens", 10}, {"stream", true},
                           {"stream_options", {{"include_usage", true}}}},
                          &head);
  ASSERT_GE(events.size(), 4u);
  const json first = json::parse(events[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_EQ(events.back(), "[DONE]");
  std::string content, finish;
  bool saw_usage = false;
  for (size_t i = 1; i + 1 < events.size(); ++i) {
    const json chunk = json::parse(events[i]);
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    EXPECT_EQ(chunk["id"], first["id"]);
    if (chunk.contains("usage") && !chunk["usage"].is_null()) {
      saw_usage = true;
      EXPECT_EQ(chunk["usage"]["completion_tokens"], 4);
    }
    if (chunk["choices"].empty()) continue;  // the include_usage chunk
    const json& c = chunk["choices"][0];
    if (c["delta"].contains("content")) content += c["delta"]["content"].get<std::string>();
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  EXPECT_EQ(content, "Yes.");
  EXPECT_EQ(finish, "stop");
  EXPECT_TRUE(saw_usage);
  ExpectNothingInFlight();
}

TEST_F(RouterTest, ModelsHealthAndMetricsEndpoints) {
  StartRouter();
  RawResponse models = Request("GET", "/v1/models");
  ASSERT_EQ(models.status, 200);
  const json list = json::parse(models.body);
  EXPECT_EQ(list["object"], "list");
  ASSERT_EQ(list["data"].size(), 1u);
  EXPECT_EQ(list["data"][0]["id"], "fake-model");
  EXPECT_EQ(Request("GET", "/health").status, 200);

  AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = Ids("ab")});
  ASSERT_EQ(Post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}}).status, 200);
  RawResponse metrics = Request("GET", "/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_TRUE(absl::StartsWith(metrics.Header("content-type"), "text/plain; version=0.0.4"));
  for (const char* family :
       {"tandem_router_requests_total", "tandem_router_ttft_seconds", "tandem_router_inter_token_latency_seconds",
        "tandem_router_queue_depth", "tandem_router_active_requests", "tandem_router_active_streams",
        "tandem_router_worker_load", "tandem_router_worker_up", "tandem_router_kv_handoff_bytes_total",
        "tandem_router_kv_handoff_seconds"}) {
    EXPECT_TRUE(absl::StrContains(metrics.body, absl::StrCat("# TYPE ", family, " "))) << family;
  }
  EXPECT_TRUE(absl::StrContains(metrics.body, "tandem_router_worker_up{worker=\"w1\",role=\"combined\"} 1"));
  EXPECT_TRUE(absl::StrContains(metrics.body, "tandem_router_ttft_seconds_count 1"));
  EXPECT_TRUE(absl::StrContains(metrics.body, "tandem_router_inter_token_latency_seconds_count 1"));
}

}  // namespace
}  // namespace tandem::router::testing
