// Prefix-affinity routing in the router: KV events over the real RouterControl stream feed the
// index the policy routes by; gaps, silent event streams and silent workers take a worker out of
// routing; a restarted router recovers the index from snapshots.
#include <atomic>

#include "grpcpp/create_channel.h"
#include "workers/prefix_router.h"
#include "router_fixture.h"
#include "tandem/security/cache_salt.h"
#include "unconnected_worker.h"

namespace tandem::router::testing {
namespace {

// The worker side of PublishKvEvents: one stream, one ack per batch.
class KvStream {
 public:
  explicit KvStream(int control_port)
      : stub_(v1::RouterControl::NewStub(grpc::CreateChannel(
            absl::StrCat("127.0.0.1:", control_port), grpc::InsecureChannelCredentials()))) {
    ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    stream_ = stub_->PublishKvEvents(&ctx_);
  }
  ~KvStream() {
    stream_->WritesDone();
    (void)stream_->Finish();
  }

  v1::KvEventAck Send(const v1::KvEventBatch& batch) {
    v1::KvEventAck ack;
    EXPECT_TRUE(stream_->Write(batch));
    EXPECT_TRUE(stream_->Read(&ack));
    return ack;
  }

 private:
  std::unique_ptr<v1::RouterControl::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::KvEventBatch, v1::KvEventAck>> stream_;
};

v1::KvEventBatch Batch(const v1::WorkerInfo& info) {
  v1::KvEventBatch batch;
  batch.set_worker_id(info.worker_id());
  batch.set_incarnation(info.incarnation());
  return batch;
}

v1::KvEventBatch Snapshot(const v1::WorkerInfo& info, std::uint64_t seq,
                          const std::vector<routing::BlockHash>& hashes) {
  v1::KvEventBatch batch = Batch(info);
  v1::KvEvent* e = batch.add_events();
  e->set_seq(seq);
  v1::KvSnapshot::TierBlocks* tier = e->mutable_snapshot()->add_tiers();
  tier->set_tier(v1::KV_TIER_DEVICE);
  tier->mutable_block_hashes()->Add(hashes.begin(), hashes.end());
  return batch;
}

// A stored (or removed) event of `hashes` in the device tier.
v1::KvEventBatch Delta(const v1::WorkerInfo& info, std::uint64_t seq,
                       const std::vector<routing::BlockHash>& hashes, bool stored) {
  v1::KvEventBatch batch = Batch(info);
  v1::KvEvent* e = batch.add_events();
  e->set_seq(seq);
  if (stored) {
    e->mutable_stored()->set_tier(v1::KV_TIER_DEVICE);
    e->mutable_stored()->mutable_block_hashes()->Add(hashes.begin(), hashes.end());
  } else {
    e->mutable_removed()->set_tier(v1::KV_TIER_DEVICE);
    e->mutable_removed()->mutable_block_hashes()->Add(hashes.begin(), hashes.end());
  }
  return batch;
}
v1::KvEventBatch Stored(const v1::WorkerInfo& info, std::uint64_t seq,
                        const std::vector<routing::BlockHash>& hashes) {
  return Delta(info, seq, hashes, true);
}
v1::KvEventBatch Removed(const v1::WorkerInfo& info, std::uint64_t seq,
                         const std::vector<routing::BlockHash>& hashes) {
  return Delta(info, seq, hashes, false);
}

int CountCalls(const FakeWorker& w, const std::string& prefix) {
  int n = 0;
  for (const std::string& c : w.calls()) n += c.rfind(prefix, 0) == 0;
  return n;
}

// 80 bytes: five full 16-token blocks with the byte tokenizer.
const std::string kPrompt =
    "Once upon a time there was a little robot who loved to read stories every night.";

class PrefixRoutingTest : public RouterTest {
 protected:
  void StartCluster(SteadyNow now = nullptr) {
    StartRouter([](RouterConfig* c) { c->routing_policy = "tandem"; }, std::move(now));
    p1_ = AddWorker("p1", v1::WORKER_ROLE_PREFILL, {.tokens = {}, .first_token = Ids("a")[0]});
    p2_ = AddWorker("p2", v1::WORKER_ROLE_PREFILL, {.tokens = {}, .first_token = Ids("a")[0]});
    d_ = AddWorker("d", v1::WORKER_ROLE_DECODE, {.tokens = Ids("bc")});
  }

  // Which prefill worker served one request for kPrompt.
  FakeWorker* Route() {
    const int before1 = CountCalls(*p1_, "Prefill"), before2 = CountCalls(*p2_, "Prefill");
    RawResponse r = Post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 2}});
    EXPECT_EQ(r.status, 200) << r.body;
    if (CountCalls(*p1_, "Prefill") > before1) return p1_;
    if (CountCalls(*p2_, "Prefill") > before2) return p2_;
    return nullptr;
  }

  // The chained block hashes of kPrompt as the workers see its tokens.
  std::vector<routing::BlockHash> PromptHashes() {
    if (hashes_.empty()) {
      FakeWorker* w = Route();
      EXPECT_NE(w, nullptr);
      const v1::PrefillRequest prefill = w->last_prefill();
      const auto& ids = prefill.prompt_token_ids();
      hashes_ = router_->prefix_router().BlockHashes(std::vector<std::int32_t>(ids.begin(), ids.end()));
      EXPECT_EQ(hashes_.size(), 5u);
    }
    return hashes_;
  }

  // Returns resend_kv_snapshot.
  bool Heartbeat(const FakeWorker& w, std::uint64_t last_kv_event_seq) {
    auto stub = v1::RouterControl::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", router_->control_port()), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    v1::HeartbeatRequest request;
    request.set_worker_id(w.id());
    request.set_incarnation(w.Info().incarnation());
    request.set_last_kv_event_seq(last_kv_event_seq);
    v1::HeartbeatResponse response;
    EXPECT_TRUE(stub->Heartbeat(&ctx, request, &response).ok());
    EXPECT_FALSE(response.reregister());
    return response.resend_kv_snapshot();
  }

  FakeWorker* p1_ = nullptr;
  FakeWorker* p2_ = nullptr;
  FakeWorker* d_ = nullptr;
  std::vector<routing::BlockHash> hashes_;
};

TEST_F(PrefixRoutingTest, RequestsFollowTheBlocksWorkersPublish) {
  StartCluster();
  const auto hashes = PromptHashes();
  // Without events the two prefill workers tie; which one wins depends on registration order.
  const auto first = Route();
  EXPECT_TRUE(first == p1_ || first == p2_);

  KvStream p2_events(router_->control_port());
  v1::KvEventAck ack = p2_events.Send(Snapshot(p2_->Info(), 1, hashes));
  EXPECT_EQ(ack.acked_seq(), 1u);
  EXPECT_FALSE(ack.resend_snapshot());
  EXPECT_EQ(router_->prefix_router().IndexedBlocks("p2"), 5);
  EXPECT_EQ(Route(), p2_);
  EXPECT_EQ(Route(), p2_);

  // p2 evicts the prefix and p1 computes it: the requests move with the blocks.
  EXPECT_EQ(p2_events.Send(Removed(p2_->Info(), 2, hashes)).acked_seq(), 2u);
  KvStream p1_events(router_->control_port());
  EXPECT_EQ(p1_events.Send(Stored(p1_->Info(), 1, {hashes[0], hashes[1], hashes[2]})).acked_seq(), 1u);
  EXPECT_EQ(Route(), p1_);
  ExpectNothingInFlight();
}

// A salted request (cache_salt; with API keys also the tenant) is routed by the blocks published
// under its salted chain only, the chain the workers are told to use (kv_hash_root): the router's
// index and the workers agree on the salted hashes.
TEST_F(PrefixRoutingTest, SaltedRequestsFollowOnlyTheBlocksOfTheirSaltedChain) {
  StartCluster();
  const auto unsalted = PromptHashes();
  const auto first = Route();
  ASSERT_NE(first, nullptr);
  FakeWorker* other = first == p1_ ? p2_ : p1_;
  const v1::PrefillRequest prefill = first->last_prefill();
  const auto& ids = prefill.prompt_token_ids();
  const std::uint64_t root = security::RequestKvHashRoot(false, "", "s1");
  ASSERT_NE(root, 0u);
  const auto salted = router_->prefix_router().BlockHashes(
      std::vector<std::int32_t>(ids.begin(), ids.end()), root);
  ASSERT_EQ(salted.size(), 5u);
  for (std::size_t i = 0; i < salted.size(); ++i) EXPECT_NE(salted[i], unsalted[i]);

  // `first` publishes the unsalted chain, `other` the salted one (as a worker computes it from
  // kv_hash_root): each request follows the blocks of its own chain.
  KvStream events(router_->control_port());
  ASSERT_FALSE(events.Send(Snapshot(other->Info(), 1, salted)).resend_snapshot());
  KvStream first_events(router_->control_port());
  ASSERT_FALSE(first_events.Send(Snapshot(first->Info(), 1, unsalted)).resend_snapshot());
  EXPECT_EQ(Route(), first) << "an unsalted request does not follow the salted blocks";
  auto route_salted = [&](const std::string& salt) {
    const int before = CountCalls(*other, "Prefill");
    RawResponse r = Post("/v1/completions",
                         {{"prompt", kPrompt}, {"max_tokens", 2}, {"cache_salt", salt}});
    EXPECT_EQ(r.status, 200) << r.body;
    return CountCalls(*other, "Prefill") > before;
  };
  EXPECT_TRUE(route_salted("s1")) << "the salted request follows its salted blocks";
  EXPECT_EQ(other->last_prefill().sampling().kv_hash_root(), root) << "the worker salts the chain";
  EXPECT_EQ(d_->last_generate().sampling().kv_hash_root(), root) << "so does the decode";
  EXPECT_TRUE(route_salted("s1"));
  EXPECT_EQ(Post("/v1/completions", {{"prompt", kPrompt}, {"cache_salt", ""}}).status, 400);
  EXPECT_EQ(Post("/v1/completions", {{"prompt", kPrompt}, {"cache_salt", 7}}).status, 400);
  ExpectNothingInFlight();
}

TEST_F(PrefixRoutingTest, AGapAsksForASnapshotAndKeepsTheWorkerOutOfRoutingUntilItArrives) {
  StartCluster();
  const auto hashes = PromptHashes();
  KvStream events(router_->control_port());
  ASSERT_FALSE(events.Send(Snapshot(p2_->Info(), 1, hashes)).resend_snapshot());
  EXPECT_EQ(Route(), p2_);

  v1::KvEventAck ack = events.Send(Stored(p2_->Info(), 3, {hashes[0]}));  // seq 2 was lost
  EXPECT_TRUE(ack.resend_snapshot());
  EXPECT_EQ(ack.acked_seq(), 1u);
  EXPECT_FALSE(router_->prefix_router().Routable("p2"));
  EXPECT_TRUE(Heartbeat(*p2_, 3));  // heartbeats repeat the request until a snapshot arrives
  EXPECT_EQ(Route(), p1_);          // its cache is unknown, so it gets nothing

  ack = events.Send(Snapshot(p2_->Info(), 4, hashes));
  EXPECT_FALSE(ack.resend_snapshot());
  EXPECT_EQ(ack.acked_seq(), 4u);
  EXPECT_FALSE(Heartbeat(*p2_, 4));
  EXPECT_EQ(Route(), p2_);
}

TEST_F(PrefixRoutingTest, AWorkerWhoseEventsStopWhileHeartbeatsAdvanceLeavesRoutingInTwoHeartbeats) {
  StartCluster();
  const auto hashes = PromptHashes();
  KvStream events(router_->control_port());
  ASSERT_FALSE(events.Send(Snapshot(p2_->Info(), 1, hashes)).resend_snapshot());
  EXPECT_FALSE(Heartbeat(*p2_, 1));
  // Events up to 6 may still be on their way when this heartbeat arrives...
  EXPECT_FALSE(Heartbeat(*p2_, 6));
  EXPECT_TRUE(router_->prefix_router().Routable("p2"));
  // ...but not one heartbeat period later.
  EXPECT_TRUE(Heartbeat(*p2_, 6));
  EXPECT_FALSE(router_->prefix_router().Routable("p2"));
  EXPECT_EQ(Route(), p1_);
  // The snapshot it sends on request brings it back.
  ASSERT_FALSE(events.Send(Snapshot(p2_->Info(), 7, hashes)).resend_snapshot());
  EXPECT_EQ(Route(), p2_);
}

TEST_F(PrefixRoutingTest, APoolOfOnlyStaleWorkersStillServesWithoutAffinity) {
  StartCluster();
  const auto hashes = PromptHashes();
  KvStream p1_events(router_->control_port()), p2_events(router_->control_port());
  ASSERT_FALSE(p1_events.Send(Snapshot(p1_->Info(), 1, {})).resend_snapshot());
  ASSERT_FALSE(p2_events.Send(Snapshot(p2_->Info(), 1, hashes)).resend_snapshot());
  EXPECT_TRUE(p1_events.Send(Stored(p1_->Info(), 5, {1})).resend_snapshot());
  EXPECT_TRUE(p2_events.Send(Stored(p2_->Info(), 5, {1})).resend_snapshot());
  EXPECT_NE(Route(), nullptr);  // served (by either: p2's blocks no longer count)
  ExpectNothingInFlight();
}

TEST_F(PrefixRoutingTest, AWorkerThatStopsHeartbeatingLeavesRoutingWithinThreeHeartbeatPeriods) {
  std::atomic<std::int64_t> now_ms{1000000};
  StartCluster([&now_ms] { return std::chrono::steady_clock::time_point(milliseconds(now_ms.load())); });
  const auto hashes = PromptHashes();
  KvStream events(router_->control_port());
  ASSERT_FALSE(events.Send(Snapshot(p2_->Info(), 1, hashes)).resend_snapshot());
  // Lease 3000 ms = three heartbeat periods of 1000 ms. p1 and d keep heartbeating, p2 does not.
  for (int period = 1; period <= 3; ++period) {
    now_ms += 1000;
    Heartbeat(*p1_, 0);
    Heartbeat(*d_, 0);
    if (period < 3) {
      EXPECT_EQ(Route(), p2_) << "period " << period;
    }
  }
  now_ms += 1;
  EXPECT_EQ(Route(), p1_);
}

TEST_F(PrefixRoutingTest, RegistrationRefusesAnotherHashSchemeNamingBoth) {
  StartCluster();
  FakeWorker other("other", v1::WORKER_ROLE_PREFILL, {});
  v1::WorkerInfo info = other.Info();
  info.set_kv_hash_scheme("xxh3-64/v2");
  grpc::Status refused = control_->Register(info);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(refused.error_message().find("'xxh3-64/v2'"), std::string::npos) << refused.error_message();
  EXPECT_NE(refused.error_message().find("'chained-fnv1a-splitmix64/v1'"), std::string::npos);
  info.clear_kv_hash_scheme();
  EXPECT_EQ(control_->Register(info).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(PrefixRoutingTest, ARestartedRouterRecoversTheIndexFromTheWorkersSnapshots) {
  StartCluster();
  const auto hashes = PromptHashes();
  {
    KvStream events(router_->control_port());
    ASSERT_FALSE(events.Send(Snapshot(p2_->Info(), 1, hashes)).resend_snapshot());
    EXPECT_EQ(Route(), p2_);
  }
  router_->Shutdown(absl::ZeroDuration());
  router_.reset();
  StartRouter();  // a fresh process: it knows no worker

  // What a worker does on a new router: heartbeat -> re-register -> new stream, snapshot first.
  for (FakeWorker* w : {p1_, p2_, d_}) {
    EXPECT_TRUE(control_->Heartbeat(w->Info()));
    ASSERT_TRUE(control_->Register(w->Info()).ok());
  }
  KvStream events(router_->control_port());
  v1::KvEventAck ack = events.Send(Snapshot(p2_->Info(), 12, hashes));
  EXPECT_FALSE(ack.resend_snapshot());
  EXPECT_EQ(ack.acked_seq(), 12u);
  EXPECT_EQ(router_->prefix_router().IndexedBlocks("p2"), 5);
  EXPECT_EQ(Route(), p2_);
  // Deltas continue from the snapshot's seq.
  EXPECT_FALSE(events.Send(Removed(p2_->Info(), 13, hashes)).resend_snapshot());
  EXPECT_EQ(router_->prefix_router().IndexedBlocks("p2"), 0);
}

TEST_F(PrefixRoutingTest, EventsBeforeRegistrationAreKeptForTheSameIncarnation) {
  StartRouter();
  FakeWorker p("p", v1::WORKER_ROLE_PREFILL, {});
  KvStream events(router_->control_port());
  ASSERT_FALSE(events.Send(Snapshot(p.Info(), 3, {11, 12, 13})).resend_snapshot());
  ASSERT_TRUE(control_->Register(p.Info()).ok());
  EXPECT_EQ(router_->prefix_router().IndexedBlocks("p"), 3);
  // A new incarnation starts empty.
  ASSERT_TRUE(control_->Register(p.Info(/*incarnation=*/8)).ok());
  EXPECT_EQ(router_->prefix_router().IndexedBlocks("p"), 0);
}

TEST_F(PrefixRoutingTest, AnEventWithoutATierIsTreatedAsLostAndAsksForASnapshot) {
  StartCluster();
  KvStream events(router_->control_port());
  v1::KvEventBatch batch = Stored(p2_->Info(), 1, {1, 2});
  batch.mutable_events(0)->mutable_stored()->set_tier(v1::KV_TIER_UNSPECIFIED);
  EXPECT_TRUE(events.Send(batch).resend_snapshot());
  EXPECT_FALSE(router_->prefix_router().Routable("p2"));
}

// Prefill speed is learnt from finished prefills: a slow worker stops being the tie-break winner.
TEST(PrefixRouterTest, LearnsEachWorkersPrefillSpeedFromFinishedPrefills) {
  std::int64_t now_ms = 0;
  auto router = PrefixRouter::Create(
      {.block_size = 16, .policy = "tandem",
       .now = [&now_ms] { return std::chrono::steady_clock::time_point(milliseconds(now_ms)); }});
  ASSERT_TRUE(router.ok()) << router.status();
  auto p1 = UnconnectedWorker("p1", v1::WORKER_ROLE_PREFILL);
  auto p2 = UnconnectedWorker("p2", v1::WORKER_ROLE_PREFILL);
  auto d = UnconnectedWorker("d", v1::WORKER_ROLE_DECODE);
  for (const auto& e : {p1, p2, d}) ASSERT_TRUE((*router)->OnRegistered(e->info()).ok());
  PrefixRouter::Candidates candidates{.prefill = {{p1}, {p2}}, .decode = {{d}}};
  const std::vector<std::int32_t> prompt(1000, 5);

  auto first = (*router)->Choose(prompt, candidates);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->prefill, p1);  // a tie before anything is learnt: the first slot
  now_ms += 1000;                 // 1 ms per token: 8x slower than the prior
  v1::PrefillResponse answer;
  (*router)->PrefillFinished(first->prefill_ticket, &answer);
  (*router)->DecodeFinished(first->decode_ticket);

  auto second = (*router)->Choose(prompt, candidates);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->prefill, p2);
}

// Requests for a long shared prompt keep queueing on its one holder (waiting there beats
// recomputing it): after the fourth such wait the router has an idle prefill worker compute the
// prompt alone, sends it as a warm-up Prefill, and learns from its answer.
TEST(PrefixRouterTest, RequestsQueueingOnAHotPrefixsHolderHaveItWarmedUpOnAnIdleWorker) {
  std::int64_t now_ms = 0;
  auto router =
      PrefixRouter::Create({.block_size = 16, .policy = "tandem", .now = [&now_ms] {
                              return std::chrono::steady_clock::time_point(milliseconds(now_ms));
                            }});
  ASSERT_TRUE(router.ok()) << router.status();
  FakeWorker idle("p2", v1::WORKER_ROLE_PREFILL, {.tokens = {}, .first_token = 5});
  v1::WorkerInfo idle_info = idle.Info(/*incarnation=*/1);
  auto p1 = UnconnectedWorker("p1", v1::WORKER_ROLE_PREFILL);
  auto p2 = std::make_shared<WorkerEntry>(
      idle_info, grpc::CreateChannel(idle.endpoint(), grpc::InsecureChannelCredentials()));
  auto d = UnconnectedWorker("d", v1::WORKER_ROLE_DECODE);
  for (const auto& e : {p1, p2, d}) ASSERT_TRUE((*router)->OnRegistered(e->info()).ok());
  PrefixRouter::Candidates candidates{.prefill = {{p1}, {p2}}, .decode = {{d}}};

  const std::vector<std::int32_t> hot(4000, 7);  // 250 blocks, 0.5 s to recompute at the prior
  v1::WorkerInfo p1_info = p1->info();
  EXPECT_EQ((*router)->OnEvents(Snapshot(p1_info, 1, (*router)->BlockHashes(hot))).acked_seq(), 1u);
  const auto request = [&](int i) {
    std::vector<std::int32_t> prompt = hot;
    prompt.insert(prompt.end(), 16, 100 + i);
    return prompt;
  };
  // The first runs at once on p1, the next four wait there; the fourth waiting one plans the copy.
  for (int i = 0; i < 4; ++i) {
    auto c = (*router)->Choose(request(i), candidates);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->prefill, p1) << i;
    EXPECT_EQ(c->warm_up, nullptr) << i;
  }
  const std::vector<std::int32_t> fifth = request(4);
  auto c = (*router)->Choose(fifth, candidates);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->prefill, p1);
  ASSERT_EQ(c->warm_up, p2);
  EXPECT_EQ(c->warm_up_tokens, 4000);
  auto sixth = (*router)->Choose(request(5), candidates);
  ASSERT_TRUE(sixth.ok());
  EXPECT_EQ(sixth->warm_up, nullptr);  // one copy of a run at a time
  EXPECT_EQ((*router)->WarmUpsInFlight(), 1);

  (*router)->SendWarmUp(*c, fifth, /*kv_hash_root=*/0);
  ASSERT_TRUE(idle.WaitForCall("Prefill warm-up-", std::chrono::seconds(10)));
  const v1::PrefillRequest sent = idle.last_prefill();
  EXPECT_TRUE(sent.warm_up());
  EXPECT_EQ(sent.prompt_token_ids_size(), 4000);
  EXPECT_FALSE(sent.has_kv_target());
  // Its answer ends the accounting (the worker's speed is learnt from it like any prefill's).
  for (int i = 0; i < 1000 && (*router)->WarmUpsInFlight() > 0; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ((*router)->WarmUpsInFlight(), 0);
}

// A router that goes away with a warm-up still out: the call's completion touches nothing of it.
TEST(PrefixRouterTest, AWarmUpOutlivingItsRouterEndsQuietly) {
  FakeWorker slow("p2", v1::WORKER_ROLE_PREFILL,
                  {.tokens = {}, .first_token = 5, .prefill_delay = milliseconds(300)});
  auto p2 = std::make_shared<WorkerEntry>(
      slow.Info(1), grpc::CreateChannel(slow.endpoint(), grpc::InsecureChannelCredentials()));
  {
    auto router = PrefixRouter::Create({.block_size = 16, .policy = "tandem"});
    ASSERT_TRUE(router.ok());
    PrefixRouter::Choice choice;
    choice.warm_up = p2;
    choice.warm_up_tokens = 32;
    choice.warm_up_ticket = 0;
    (*router)->SendWarmUp(choice, std::vector<std::int32_t>(48, 9), 0);
    ASSERT_TRUE(slow.WaitForCall("Prefill warm-up-", std::chrono::seconds(10)));
  }
  std::this_thread::sleep_for(milliseconds(600));  // the answer arrives after the router is gone
  EXPECT_EQ(slow.last_prefill().prompt_token_ids_size(), 32);
}

}  // namespace
}  // namespace tandem::router::testing
