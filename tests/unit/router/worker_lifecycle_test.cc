// Workers leaving the router on purpose or not, and rollouts: the draining flag, deregistration
// (only the named incarnation, series deleted), forgetting a worker that died, and pairing a
// prefill only with a decode of the same KV layout, preferring its generation (issue 13).

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "router_fixture.h"
#include "tandem/metrics/registry.h"
#include "tandem/routing/policy.h"
#include "workers/prefix_router.h"
#include "workers/worker_registry.h"
#include "workers/worker_selector.h"

namespace tandem::router {
namespace {

using std::chrono::milliseconds;
using testing::json;
using testing::RawResponse;

v1::WorkerInfo Info(const std::string& id, v1::WorkerRole role, const std::string& layout = "L",
                    const std::string& generation = "g1", std::uint64_t incarnation = 7) {
  v1::WorkerInfo info;
  info.set_worker_id(id);
  info.set_role(role);
  info.set_model("m");
  info.set_grpc_endpoint("127.0.0.1:1");  // never dialled: no call is made here
  info.set_kv_block_size(16);
  info.set_kv_hash_scheme(routing::kKvHashScheme);
  info.set_max_context(4096);
  info.set_incarnation(incarnation);
  info.set_kv_layout_id(layout);
  info.set_generation(generation);
  return info;
}

// The registry and both selectors without gRPC traffic, on a clock the test moves.
class WorkerLifecycleTest : public ::testing::Test {
 protected:
  WorkerLifecycleTest() {
    metrics_ = RouterMetrics::Create(&metrics_registry_).value();
    registry_ = std::make_unique<WorkerRegistry>(WorkerRegistry::Options{
        .lease_ms = 1000, .now = [this] { return now_; }, .metrics = &metrics_});
  }

  void Register(const v1::WorkerInfo& info) {
    v1::RegisterWorkerRequest request;
    *request.mutable_worker() = info;
    ASSERT_TRUE(registry_->Register(request).ok());
    infos_.push_back(info);
  }
  bool Heartbeat(const v1::WorkerInfo& info, bool draining = false, std::uint32_t running = 0) {
    v1::HeartbeatRequest request;
    request.set_worker_id(info.worker_id());
    request.set_incarnation(info.incarnation());
    request.mutable_load()->set_draining(draining);
    request.mutable_load()->set_running_requests(running);
    return !registry_->Heartbeat(request).reregister();
  }
  std::string Metrics() const { return metrics_registry_.RenderText(); }
  bool HasSeriesOf(const std::string& worker) const {
    return absl::StrContains(Metrics(), absl::StrCat("worker=\"", worker, "\""));
  }
  std::unique_ptr<PrefixRouter> MakePrefixRouter(const std::string& policy) {
    auto router = PrefixRouter::Create({.block_size = 16, .policy = policy, .now = [this] {
                                          return now_;
                                        }});
    EXPECT_TRUE(router.ok()) << router.status();
    for (const v1::WorkerInfo& info : infos_) EXPECT_TRUE((*router)->OnRegistered(info).ok());
    return std::move(*router);
  }

  std::chrono::steady_clock::time_point now_ = std::chrono::steady_clock::now();
  metrics::Registry metrics_registry_;
  RouterMetrics metrics_;
  std::unique_ptr<WorkerRegistry> registry_;
  std::vector<v1::WorkerInfo> infos_;
};

TEST_F(WorkerLifecycleTest, ADrainingWorkerGetsNoNewWorkButStaysUpAndKeepsItsRequests) {
  const auto p1 = Info("p1", v1::WORKER_ROLE_PREFILL), p2 = Info("p2", v1::WORKER_ROLE_PREFILL);
  const auto d1 = Info("d1", v1::WORKER_ROLE_DECODE);
  Register(p1);
  Register(p2);
  Register(d1);
  LeastLoadedSelector selector(registry_.get());
  // p1 is least loaded (ties go to the lowest id) and takes a request before its drain.
  auto before = selector.Select("m", {});
  ASSERT_TRUE(before.ok());
  ASSERT_EQ(before->prefill->worker().id(), "p1");
  CallCanceller watcher;
  before->prefill->Watch(&watcher);

  ASSERT_TRUE(Heartbeat(p1, /*draining=*/true));
  EXPECT_TRUE(registry_->IsDraining("p1"));
  EXPECT_TRUE(registry_->IsUp("p1")) << "draining is not down";
  EXPECT_FALSE(watcher.cancelled()) << "its requests in flight continue";
  EXPECT_TRUE(absl::StrContains(
      Metrics(), "tandem_router_worker_draining{worker=\"p1\",role=\"prefill\"} 1"));
  EXPECT_TRUE(absl::StrContains(Metrics(),
                                "tandem_router_worker_up{worker=\"p1\",role=\"prefill\"} 1"));
  ASSERT_EQ(registry_->Healthy("m", v1::WORKER_ROLE_PREFILL).size(), 1u);
  for (int i = 0; i < 10; ++i) {
    auto plan = selector.Select("m", {});
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->prefill->worker().id(), "p2");
  }
  // A later heartbeat without the flag (reordered, or a bug) does not undo the drain.
  ASSERT_TRUE(Heartbeat(p1, /*draining=*/false));
  EXPECT_TRUE(registry_->IsDraining("p1"));
  EXPECT_TRUE(registry_->Ready("m").ready);

  // Readiness counts only workers that take new work.
  ASSERT_TRUE(Heartbeat(p2, /*draining=*/true));
  const WorkerRegistry::Readiness ready = registry_->Ready("m");
  EXPECT_FALSE(ready.ready);
  EXPECT_TRUE(absl::StrContains(ready.reason, "0 prefill")) << ready.reason;
  EXPECT_EQ(selector.Select("m", {}).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(registry_->Placeable(before->prefill->worker()));
  EXPECT_TRUE(registry_->Placeable(before->decode->worker()));
}

TEST_F(WorkerLifecycleTest, EveryPolicySkipsDrainingWorkers) {
  const auto p1 = Info("p1", v1::WORKER_ROLE_PREFILL), p2 = Info("p2", v1::WORKER_ROLE_PREFILL);
  const auto d1 = Info("d1", v1::WORKER_ROLE_DECODE), d2 = Info("d2", v1::WORKER_ROLE_DECODE);
  for (const auto& info : {p1, p2, d1, d2}) Register(info);
  ASSERT_TRUE(Heartbeat(p1, true));
  ASSERT_TRUE(Heartbeat(d2, true));
  for (const std::string& policy : routing::PolicyNames()) {
    auto router = MakePrefixRouter(policy);
    router->OnDraining("p1", 7);
    router->OnDraining("d2", 7);
    PolicySelector selector(registry_.get(), router.get());
    for (int i = 0; i < 30; ++i) {
      std::vector<std::int32_t> prompt(16 * (1 + i % 4), 3 + i);
      auto plan = selector.Select("m", prompt);
      ASSERT_TRUE(plan.ok()) << policy << ": " << plan.status();
      ASSERT_TRUE(plan->disaggregated());
      EXPECT_EQ(plan->prefill->worker().id(), "p2") << policy;
      EXPECT_EQ(plan->decode->worker().id(), "d1") << policy;
    }
  }
}

TEST_F(WorkerLifecycleTest, DeregistrationForgetsTheWorkerAndDeletesItsSeries) {
  const auto d1 = Info("d1", v1::WORKER_ROLE_DECODE), d2 = Info("d2", v1::WORKER_ROLE_DECODE);
  const auto d3 = Info("d3", v1::WORKER_ROLE_DECODE);
  Register(Info("p1", v1::WORKER_ROLE_PREFILL));
  Register(d3);
  // A request still on d3 when its drain deadline passed: cut when the process exits, so the
  // router lets it migrate at once.
  std::unique_ptr<WorkerLease> on_d3 =
      registry_->Acquire(registry_->Healthy("m", v1::WORKER_ROLE_DECODE)[0].entry);
  ASSERT_EQ(on_d3->worker().id(), "d3");
  CallCanceller watcher;
  on_d3->Watch(&watcher);
  ASSERT_TRUE(Heartbeat(d3, true));
  EXPECT_FALSE(watcher.cancelled());
  EXPECT_TRUE(registry_->Deregister("d3", 7, "drain deadline"));
  EXPECT_TRUE(watcher.cancelled());
  EXPECT_EQ(watcher.reason().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(registry_->Knows("d3"));
  EXPECT_FALSE(HasSeriesOf("d3"));
  on_d3.reset();  // the lease ending after the deregistration must not bring a series back
  EXPECT_FALSE(HasSeriesOf("d3"));

  Register(d1);
  Register(d2);
  ASSERT_TRUE(Heartbeat(d1, true));
  ASSERT_TRUE(HasSeriesOf("d1"));
  EXPECT_TRUE(registry_->Deregister("d1", 7, "drained"));
  EXPECT_FALSE(registry_->Knows("d1"));
  EXPECT_FALSE(registry_->IsUp("d1"));
  const std::string text = Metrics();
  for (const char* family : {"tandem_router_worker_up", "tandem_router_worker_load",
                             "tandem_router_worker_draining"}) {
    EXPECT_FALSE(absl::StrContains(text, absl::StrCat(family, "{worker=\"d1\"")))
        << family << "\n" << text;
    EXPECT_TRUE(absl::StrContains(text, absl::StrCat(family, "{worker=\"d2\""))) << family;
  }
  EXPECT_FALSE(Heartbeat(d1)) << "a late heartbeat is told to register again";
  for (int i = 0; i < 5; ++i) {
    auto plan = LeastLoadedSelector(registry_.get()).Select("m", {});
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->decode->worker().id(), "d2");
  }
  EXPECT_FALSE(registry_->Deregister("d1", 7, "again")) << "a repeated deregistration is a no-op";
}

TEST_F(WorkerLifecycleTest, AStaleIncarnationsDeregistrationIsIgnored) {
  Register(Info("p1", v1::WORKER_ROLE_PREFILL));
  Register(Info("d1", v1::WORKER_ROLE_DECODE, "L", "g1", /*incarnation=*/7));
  // The pod restarted under the same id before the old process's deregistration arrived.
  Register(Info("d1", v1::WORKER_ROLE_DECODE, "L", "g1", /*incarnation=*/8));
  EXPECT_FALSE(registry_->Deregister("d1", 7, "drained"));
  EXPECT_TRUE(registry_->IsUp("d1"));
  EXPECT_TRUE(absl::StrContains(Metrics(),
                                "tandem_router_worker_up{worker=\"d1\",role=\"decode\"} 1"));
  auto healthy = registry_->Healthy("m", v1::WORKER_ROLE_DECODE);
  ASSERT_EQ(healthy.size(), 1u);
  EXPECT_EQ(healthy[0].entry->info().incarnation(), 8u);
  EXPECT_TRUE(registry_->Deregister("d1", 8, "drained"));
  EXPECT_FALSE(HasSeriesOf("d1"));
}

TEST_F(WorkerLifecycleTest, AWorkerThatDiedWithoutDeregisteringIsForgottenAfterTheBound) {
  const auto d1 = Info("d1", v1::WORKER_ROLE_DECODE);
  Register(d1);
  now_ += milliseconds(1500);  // past the 1 s lease
  registry_->ExpireLeases();
  EXPECT_FALSE(registry_->IsUp("d1"));
  EXPECT_TRUE(absl::StrContains(Metrics(),
                                "tandem_router_worker_up{worker=\"d1\",role=\"decode\"} 0"))
      << "down is shown for a while";
  now_ += milliseconds(WorkerRegistry::kForgetAfterLeases * 1000 - 100);
  registry_->ExpireLeases();
  EXPECT_TRUE(registry_->Knows("d1"));
  now_ += milliseconds(200);
  registry_->ExpireLeases();
  EXPECT_FALSE(registry_->Knows("d1"));
  EXPECT_FALSE(HasSeriesOf("d1")) << Metrics();
  // Should it come back after all, it registers again and gets fresh series.
  EXPECT_FALSE(Heartbeat(d1));
  Register(d1);
  EXPECT_TRUE(absl::StrContains(Metrics(),
                                "tandem_router_worker_up{worker=\"d1\",role=\"decode\"} 1"));
}

TEST_F(WorkerLifecycleTest, AWorkerBackUnderAnotherRoleLeavesNoSeriesOfTheOldRole) {
  Register(Info("w", v1::WORKER_ROLE_PREFILL, "L", "g1", 7));
  Register(Info("w", v1::WORKER_ROLE_DECODE, "L", "g1", 8));
  EXPECT_FALSE(absl::StrContains(Metrics(), "role=\"prefill\""));
  EXPECT_TRUE(absl::StrContains(Metrics(), "tandem_router_worker_up{worker=\"w\",role=\"decode\"} 1"));
}

TEST_F(WorkerLifecycleTest, LeastLoadedPairsOnlyTheSameKvLayoutPreferringTheSameGeneration) {
  const auto p = Info("p", v1::WORKER_ROLE_PREFILL, "A", "g2");
  const auto d_other_layout = Info("d0", v1::WORKER_ROLE_DECODE, "B", "g2");
  const auto d_old = Info("d1", v1::WORKER_ROLE_DECODE, "A", "g1");
  const auto d_new = Info("d2", v1::WORKER_ROLE_DECODE, "A", "g2");
  Register(p);
  Register(d_other_layout);
  LeastLoadedSelector selector(registry_.get());
  auto none = selector.Select("m", {});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(none.status().message(), "kv_layout_id")) << none.status();

  Register(d_old);
  ASSERT_TRUE(Heartbeat(d_old, false, /*running=*/5));  // busier than d0, still the only match
  auto plan = selector.Select("m", {});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->decode->worker().id(), "d1");
  plan = WorkerPlan{};

  Register(d_new);
  ASSERT_TRUE(Heartbeat(d_new, false, /*running=*/9));  // busier, but of the prefill's generation
  plan = selector.Select("m", {});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->decode->worker().id(), "d2");
  plan = WorkerPlan{};

  ASSERT_TRUE(Heartbeat(d_new, true));  // draining: the other generation it is
  plan = selector.Select("m", {});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->decode->worker().id(), "d1");
}

TEST_F(WorkerLifecycleTest, NoPolicyEverFormsAnIncompatiblePair) {
  // A rollout caught in the middle: two KV layouts (e.g. a new block size or model) and two
  // generations of the same layout.
  const std::vector<v1::WorkerInfo> workers = {
      Info("pa1", v1::WORKER_ROLE_PREFILL, "A", "g1"), Info("pa2", v1::WORKER_ROLE_PREFILL, "A", "g2"),
      Info("pb", v1::WORKER_ROLE_PREFILL, "B", "g3"),  Info("da1", v1::WORKER_ROLE_DECODE, "A", "g1"),
      Info("da2", v1::WORKER_ROLE_DECODE, "A", "g2"),  Info("db", v1::WORKER_ROLE_DECODE, "B", "g3"),
      Info("dc", v1::WORKER_ROLE_DECODE, "C", "g3")};  // no prefill of its layout
  for (const auto& info : workers) Register(info);
  for (const std::string& policy : routing::PolicyNames()) {
    auto router = MakePrefixRouter(policy);
    PolicySelector selector(registry_.get(), router.get());
    std::map<std::string, int> decodes;
    for (int i = 0; i < 60; ++i) {
      std::vector<std::int32_t> prompt(16 * (1 + i % 5), 3 + i % 7);
      auto plan = selector.Select("m", prompt);
      ASSERT_TRUE(plan.ok()) << policy << ": " << plan.status();
      ASSERT_TRUE(plan->disaggregated());
      const v1::WorkerInfo& pi = plan->prefill->worker().info();
      const v1::WorkerInfo& di = plan->decode->worker().info();
      EXPECT_EQ(pi.kv_layout_id(), di.kv_layout_id())
          << policy << ": " << pi.worker_id() << " paired with " << di.worker_id();
      EXPECT_EQ(pi.generation(), di.generation())
          << policy << ": " << pi.worker_id() << " paired with " << di.worker_id();
      ++decodes[di.worker_id()];
    }
    EXPECT_EQ(decodes.count("dc"), 0u) << policy;
  }
}

// The same end to end: real RouterControl gRPC, fake workers, HTTP requests.
class RouterDrainTest : public testing::RouterTest {};

TEST_F(RouterDrainTest, ADrainingDecodeFinishesItsStreamAndGetsNoNewRequest) {
  StartRouter([](RouterConfig* c) { c->routing_policy = "least-load"; });
  AddWorker("p1", v1::WORKER_ROLE_PREFILL, {.tokens = {}, .first_token = 'a' + 3});
  testing::FakeWorker* slow = AddWorker(
      "d1", v1::WORKER_ROLE_DECODE,
      {.tokens = testing::Ids("bcdefghij"), .token_delay = milliseconds(60)});
  RawResponse head;
  auto stream = OpenStream("/v1/completions",
                           {{"model", "fake-model"}, {"prompt", "hi"}, {"max_tokens", 10},
                            {"stream", true}},
                           &head);
  ASSERT_EQ(head.status, 200);
  ASSERT_TRUE(slow->WaitForCall("Generate", milliseconds(5000)));
  testing::FakeWorker* fast =
      AddWorker("d2", v1::WORKER_ROLE_DECODE, {.tokens = testing::Ids("xyz")});
  ASSERT_FALSE(control_->Heartbeat(slow->Info(), 0, 0, /*draining=*/true));
  const std::size_t slow_calls = slow->calls().size();

  for (int i = 0; i < 4; ++i) {
    auto r = Post("/v1/completions", {{"model", "fake-model"}, {"prompt", "yo"}, {"max_tokens", 3}});
    EXPECT_EQ(r.status, 200) << r.body;
  }
  EXPECT_EQ(slow->calls().size(), slow_calls) << "nothing new reached the draining decode";
  EXPECT_TRUE(fast->WaitForCall("Generate", milliseconds(1000)));
  EXPECT_EQ(Metric("tandem_router_worker_draining{worker=\"d1\",role=\"decode\"}"), 1.0);
  EXPECT_EQ(Metric("tandem_router_worker_up{worker=\"d1\",role=\"decode\"}"), 1.0);

  // The stream it held goes on to the end, no error, no migration.
  std::string text;
  bool done = false;
  while (auto event = stream->ReadEvent(milliseconds(5000))) {
    ASSERT_FALSE(absl::StrContains(*event, "error")) << *event;
    if (*event == "data: [DONE]") {
      done = true;
      break;
    }
    const json chunk = json::parse(event->substr(6));
    if (chunk["choices"].empty()) continue;  // the usage chunk
    text += chunk["choices"][0]["text"].get<std::string>();
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(text, "abcdefghij");
  EXPECT_EQ(Metric("tandem_router_migrations_total"), 0.0);

  // Then it deregisters: gone from the next scrape.
  ASSERT_TRUE(control_->Deregister(slow->Info()).ok());
  const RawResponse metrics = Request("GET", "/metrics");
  EXPECT_FALSE(absl::StrContains(metrics.body, "worker=\"d1\"")) << metrics.body;
  EXPECT_TRUE(absl::StrContains(metrics.body, "worker=\"d2\""));
  ExpectNothingInFlight();
}

TEST_F(RouterDrainTest, DeregistrationNamesTheIncarnationAndReadinessIgnoresDrainingWorkers) {
  StartRouter();
  testing::FakeWorker* w = AddWorker("w1", v1::WORKER_ROLE_COMBINED, {.tokens = {'o' + 3}});
  EXPECT_EQ(Request("GET", "/ready").status, 200);
  ASSERT_FALSE(control_->Heartbeat(w->Info(), 0, 0, /*draining=*/true));
  EXPECT_EQ(Request("GET", "/ready").status, 503) << "its only worker is draining";

  // A new process under the same id (a restarted pod), then the old one's late deregistration.
  ASSERT_TRUE(control_->Register(w->Info(/*incarnation=*/8)).ok());
  EXPECT_EQ(Request("GET", "/ready").status, 200);
  ASSERT_TRUE(control_->Deregister(w->Info(/*incarnation=*/7)).ok());
  EXPECT_TRUE(router_->registry().IsUp("w1"));
  EXPECT_EQ(Metric("tandem_router_worker_up{worker=\"w1\",role=\"combined\"}"), 1.0);
  auto r = Post("/v1/completions", {{"model", "fake-model"}, {"prompt", "hi"}, {"max_tokens", 1}});
  EXPECT_EQ(r.status, 200) << r.body;

  ASSERT_TRUE(control_->Deregister(w->Info(/*incarnation=*/8)).ok());
  EXPECT_FALSE(router_->registry().IsUp("w1"));
  EXPECT_FALSE(absl::StrContains(Request("GET", "/metrics").body, "worker=\"w1\""));
  EXPECT_EQ(Request("GET", "/ready").status, 503);
}

}  // namespace
}  // namespace tandem::router
