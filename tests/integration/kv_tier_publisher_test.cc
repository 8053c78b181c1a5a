// The worker's KV event publisher against an in-process RouterControl server (real gRPC):
// snapshot first on every stream, deltas numbered one by one per incarnation, snapshots on
// request, bounded memory while the router is away.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "grpcpp/create_channel.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "kv_event_publisher.h"
#include "tandem/rpc/router_link.h"
#include "tandem/kv/clock.h"
#include "tandem/kv/tiered_kv_store.h"

namespace tandem::worker {
namespace {

using Clock = std::chrono::steady_clock;

// Records every event per stream; can ask for a snapshot or hang up on cue.
class FakeRouterControl final : public v1::RouterControl::Service {
 public:
  struct Connection {
    std::vector<v1::KvEvent> events;
    std::string worker_id;
    std::uint64_t incarnation = 0;
  };

  grpc::Status PublishKvEvents(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::KvEventAck, v1::KvEventBatch>* stream) override {
    std::size_t index;
    {
      std::lock_guard<std::mutex> lock(mu_);
      index = connections_.size();
      connections_.emplace_back();
    }
    v1::KvEventBatch batch;
    int batches = 0;
    while (stream->Read(&batch)) {
      v1::KvEventAck ack;
      bool hang_up = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        Connection& c = connections_[index];
        c.worker_id = batch.worker_id();
        c.incarnation = batch.incarnation();
        for (const v1::KvEvent& e : batch.events()) c.events.push_back(e);
        ack.set_acked_seq(batch.events(batch.events_size() - 1).seq());
        if (resend_after_deltas_ > 0 && Deltas(c) >= resend_after_deltas_) {
          ack.set_resend_snapshot(true);
          resend_after_deltas_ = 0;
        }
        hang_up = ++batches == hang_up_after_batches_;
        if (hang_up) hang_up_after_batches_ = 0;
      }
      cv_.notify_all();
      stream->Write(ack);
      if (hang_up) return grpc::Status::OK;
    }
    return grpc::Status::OK;
  }

  grpc::Status RegisterWorker(grpc::ServerContext*, const v1::RegisterWorkerRequest*,
                              v1::RegisterWorkerResponse* response) override {
    response->set_heartbeat_interval_ms(20);
    std::lock_guard<std::mutex> lock(mu_);
    ++registrations_;
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      heartbeat_seqs_.push_back(request->last_kv_event_seq());
      response->set_resend_kv_snapshot(resend_on_heartbeat_);
      resend_on_heartbeat_ = false;
    }
    cv_.notify_all();
    return grpc::Status::OK;
  }
  int registrations() {
    std::lock_guard<std::mutex> lock(mu_);
    return registrations_;
  }
  void ResendSnapshotOnNextHeartbeat() {
    std::lock_guard<std::mutex> lock(mu_);
    resend_on_heartbeat_ = true;
  }
  bool WaitForHeartbeatSeq(std::uint64_t seq) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(20), [&] {
      return !heartbeat_seqs_.empty() && heartbeat_seqs_.back() == seq;
    });
  }

  void ResendSnapshotAfterDeltas(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    resend_after_deltas_ = n;
  }
  void HangUpAfterBatches(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    hang_up_after_batches_ = n;
  }
  // Waits until `done(connections)` holds.
  bool WaitFor(const std::function<bool(const std::vector<Connection>&)>& done) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(20), [&] { return done(connections_); });
  }
  std::vector<Connection> connections() {
    std::lock_guard<std::mutex> lock(mu_);
    return connections_;
  }

 private:
  static int Deltas(const Connection& c) {
    int n = 0;
    for (const v1::KvEvent& e : c.events) n += e.has_snapshot() ? 0 : 1;
    return n;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Connection> connections_;
  int resend_after_deltas_ = 0;
  int registrations_ = 0;
  std::vector<std::uint64_t> heartbeat_seqs_;
  bool resend_on_heartbeat_ = false;
  int hang_up_after_batches_ = 0;
};

struct Server {
  explicit Server(FakeRouterControl* service, int port = 0) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:" + std::to_string(port),
                             grpc::InsecureServerCredentials(), &this->port);
    builder.RegisterService(service);
    server = builder.BuildAndStart();
  }
  ~Server() { server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200)); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

std::set<std::uint64_t> SnapshotTier(const v1::KvEvent& e, v1::KvTier tier) {
  std::set<std::uint64_t> out;
  for (const auto& t : e.snapshot().tiers()) {
    if (t.tier() == tier) out.insert(t.block_hashes().begin(), t.block_hashes().end());
  }
  return out;
}

// Every event of every connection, in arrival order, has seq previous + 1.
void ExpectConsecutiveSeqs(const std::vector<FakeRouterControl::Connection>& connections) {
  std::uint64_t last = 0;
  for (const auto& c : connections) {
    for (const v1::KvEvent& e : c.events) {
      if (e.has_snapshot()) {
        EXPECT_GT(e.seq(), last) << "a snapshot never goes back in sequence";
      } else {
        EXPECT_EQ(e.seq(), last + 1) << "deltas are numbered one by one";
      }
      last = e.seq();
    }
  }
}

engine::KvCacheEvent Device(engine::KvCacheEvent::Kind kind, std::uint64_t hash,
                            std::uint64_t parent = 0) {
  engine::KvCacheEvent e;
  e.kind = kind;
  e.block_hash = hash;
  e.parent_hash = parent;
  return e;
}
constexpr auto kStored = engine::KvCacheEvent::Kind::kStored;
constexpr auto kEvicted = engine::KvCacheEvent::Kind::kEvicted;

class KvEventPublisherTest : public ::testing::Test {
 protected:
  std::unique_ptr<kv::TieredKvStore> OpenStore(std::size_t event_log_capacity = 1 << 16) {
    kv::TieredKvStoreOptions o;
    o.host_capacity_bytes = 1 << 20;
    o.clock = &clock_;
    o.background_thread = false;
    o.event_log_capacity = event_log_capacity;
    auto s = kv::TieredKvStore::Open(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return std::move(*s);
  }
  std::unique_ptr<KvEventPublisher> Publish(const std::string& address, kv::TieredKvStore* store,
                                            std::size_t max_pending = 1 << 16) {
    KvEventPublisherOptions o;
    o.worker_id = "w1";
    o.incarnation = 77;
    o.max_pending_events = max_pending;
    o.max_backoff = std::chrono::milliseconds(200);
    return std::make_unique<KvEventPublisher>(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()), o, store);
  }
  static void Put(kv::TieredKvStore& store, std::uint64_t hash, std::uint64_t parent = 0) {
    const std::vector<std::uint8_t> bytes(64, static_cast<std::uint8_t>(hash));
    ASSERT_TRUE(store.Put(kv::TrafficClass::kChat, hash, parent, bytes).ok());
  }

  kv::FakeClock clock_{1'700'000'000'000};
  FakeRouterControl router_;
};

TEST_F(KvEventPublisherTest, SnapshotOfEveryTierFirstThenDeltasInOrder) {
  Server server(&router_);
  auto store = OpenStore();
  Put(*store, 101);
  Put(*store, 102, 101);
  auto publisher = Publish(server.address(), store.get());
  ASSERT_TRUE(router_.WaitFor([](const auto& c) { return !c.empty() && !c[0].events.empty(); }));
  publisher->OnDeviceEvent(Device(kStored, 1));
  publisher->OnDeviceEvent(Device(kStored, 2, 1));
  publisher->OnDeviceEvent(Device(kEvicted, 2, 1));
  Put(*store, 103, 102);
  // The same block in a second traffic class is the same block to the router: no event.
  ASSERT_TRUE(
      store->Put(kv::TrafficClass::kAgent, 101, 0, std::vector<std::uint8_t>(64, 1)).ok());
  ASSERT_TRUE(router_.WaitFor([](const auto& c) { return c[0].events.size() >= 5; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // nothing more should come

  const auto connections = router_.connections();
  ASSERT_EQ(connections.size(), 1u);
  const auto& events = connections[0].events;
  EXPECT_EQ(connections[0].worker_id, "w1");
  EXPECT_EQ(connections[0].incarnation, 77u);
  ASSERT_EQ(events.size(), 5u);
  ASSERT_TRUE(events[0].has_snapshot());
  EXPECT_EQ(events[0].seq(), 1u);
  EXPECT_EQ(SnapshotTier(events[0], v1::KV_TIER_HOST), (std::set<std::uint64_t>{101, 102}));
  EXPECT_TRUE(SnapshotTier(events[0], v1::KV_TIER_DEVICE).empty());
  ExpectConsecutiveSeqs(connections);
  // Device events in their order; the host store on its own.
  EXPECT_EQ(events[1].stored().tier(), v1::KV_TIER_DEVICE);
  EXPECT_EQ(events[1].stored().block_hashes(0), 1u);
  EXPECT_EQ(events[2].stored().parent_hash(), 1u);
  EXPECT_EQ(events[3].removed().tier(), v1::KV_TIER_DEVICE);
  EXPECT_EQ(events[3].removed().block_hashes(0), 2u);
  EXPECT_EQ(events[4].stored().tier(), v1::KV_TIER_HOST);
  EXPECT_EQ(events[4].stored().block_hashes(0), 103u);
  EXPECT_EQ(events[4].stored().parent_hash(), 102u);
  EXPECT_EQ(publisher->last_sent_seq(), 5u);
}

TEST_F(KvEventPublisherTest, ResendSnapshotAckAndRequestSnapshotBothYieldASnapshot) {
  Server server(&router_);
  auto publisher = Publish(server.address(), nullptr);
  ASSERT_TRUE(router_.WaitFor([](const auto& c) { return !c.empty() && !c[0].events.empty(); }));
  router_.ResendSnapshotAfterDeltas(2);
  publisher->OnDeviceEvent(Device(kStored, 1));
  publisher->OnDeviceEvent(Device(kStored, 2, 1));
  ASSERT_TRUE(router_.WaitFor([](const auto& c) { return c[0].events.size() >= 4; }));
  publisher->OnDeviceEvent(Device(kEvicted, 1));
  publisher->RequestSnapshot();  // as on a heartbeat's resend_kv_snapshot
  ASSERT_TRUE(router_.WaitFor([](const auto& c) {
    int snapshots = 0;
    for (const auto& e : c[0].events) snapshots += e.has_snapshot();
    return snapshots >= 3;
  }));
  const auto connections = router_.connections();
  ExpectConsecutiveSeqs(connections);
  const auto& events = connections[0].events;
  ASSERT_TRUE(events[3].has_snapshot());
  EXPECT_EQ(SnapshotTier(events[3], v1::KV_TIER_DEVICE), (std::set<std::uint64_t>{1, 2}));
  const v1::KvEvent& last = events.back();
  ASSERT_TRUE(last.has_snapshot());
  EXPECT_EQ(SnapshotTier(last, v1::KV_TIER_DEVICE), (std::set<std::uint64_t>{2}));
}

TEST_F(KvEventPublisherTest, EveryNewStreamStartsWithASnapshot) {
  Server server(&router_);
  router_.HangUpAfterBatches(2);
  auto publisher = Publish(server.address(), nullptr);
  ASSERT_TRUE(router_.WaitFor([](const auto& c) { return !c.empty() && !c[0].events.empty(); }));
  publisher->OnDeviceEvent(Device(kStored, 7));
  ASSERT_TRUE(router_.WaitFor([](const auto& c) { return c.size() >= 2 && !c[1].events.empty(); }));
  publisher->OnDeviceEvent(Device(kStored, 8, 7));
  ASSERT_TRUE(router_.WaitFor([](const auto& c) { return c[1].events.size() >= 2; }));
  const auto connections = router_.connections();
  ExpectConsecutiveSeqs(connections);
  ASSERT_TRUE(connections[1].events[0].has_snapshot());
  EXPECT_EQ(SnapshotTier(connections[1].events[0], v1::KV_TIER_DEVICE),
            (std::set<std::uint64_t>{7}));
  EXPECT_EQ(connections[1].events[1].stored().block_hashes(0), 8u);
}

TEST_F(KvEventPublisherTest, UnreachableRouterCostsBoundedMemoryAndGetsASnapshotLater) {
  int port = 0;
  {
    Server probe(&router_);  // a free port, then nobody listening on it
    port = probe.port;
  }
  auto publisher = Publish("127.0.0.1:" + std::to_string(port), nullptr, /*max_pending=*/100);
  for (std::uint64_t h = 1; h <= 5000; ++h) publisher->OnDeviceEvent(Device(kStored, h));
  for (std::uint64_t h = 1; h <= 4990; ++h) publisher->OnDeviceEvent(Device(kEvicted, h));
  EXPECT_LE(publisher->stats().pending_events, 100u);
  FakeRouterControl late;
  Server server(&late, port);
  ASSERT_TRUE(late.WaitFor([](const auto& c) { return !c.empty() && !c[0].events.empty(); }));
  const v1::KvEvent first = late.connections()[0].events[0];
  ASSERT_TRUE(first.has_snapshot());
  std::set<std::uint64_t> expected;
  for (std::uint64_t h = 4991; h <= 5000; ++h) expected.insert(h);
  EXPECT_EQ(SnapshotTier(first, v1::KV_TIER_DEVICE), expected);
}

TEST_F(KvEventPublisherTest, TierEventLogOverflowIsResyncedThroughASnapshot) {
  Server server(&router_);
  auto store = OpenStore(/*event_log_capacity=*/4);
  auto publisher = Publish(server.address(), store.get());
  ASSERT_TRUE(router_.WaitFor([](const auto& c) { return !c.empty() && !c[0].events.empty(); }));
  for (std::uint64_t h = 1; h <= 40; ++h) Put(*store, h);
  std::set<std::uint64_t> all;
  for (std::uint64_t h = 1; h <= 40; ++h) all.insert(h);
  // Whether the publisher kept up or lost events to the small log, the router ends up knowing
  // every block: from deltas, or from a resync snapshot.
  ASSERT_TRUE(router_.WaitFor([&](const auto& c) {
    std::set<std::uint64_t> known;
    for (const auto& e : c[0].events) {
      if (e.has_snapshot()) known = SnapshotTier(e, v1::KV_TIER_HOST);
      if (e.has_stored()) known.insert(e.stored().block_hashes(0));
    }
    return known == all;
  }));
  ExpectConsecutiveSeqs(router_.connections());
}

TEST_F(KvEventPublisherTest, HeartbeatsCarryTheLastSeqAndCanAskForASnapshot) {
  Server server(&router_);
  auto publisher = Publish(server.address(), nullptr);
  v1::WorkerInfo info;
  info.set_worker_id("w1");
  info.set_incarnation(77);
  rpc::RouterLink::KvSync sync;
  sync.last_event_seq = [&] { return publisher->last_sent_seq(); };
  sync.resend_snapshot = [&] { publisher->RequestSnapshot(); };
  rpc::RouterLink link(server.address(), info, 20, [] { return v1::WorkerLoad(); }, sync);
  ASSERT_TRUE(router_.WaitFor([](const auto& c) { return !c.empty() && !c[0].events.empty(); }));
  while (router_.registrations() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the registration's snapshot
  publisher->OnDeviceEvent(Device(kStored, 5));
  ASSERT_TRUE(router_.WaitFor([](const auto& c) {
    return !c[0].events.empty() && !c[0].events.back().has_snapshot();
  }));
  const std::uint64_t last = router_.connections()[0].events.back().seq();
  EXPECT_TRUE(router_.WaitForHeartbeatSeq(last)) << "heartbeats report the last seq sent";
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(router_.connections()[0].events.back().seq(), last)
      << "plain heartbeats cause no snapshot";
  router_.ResendSnapshotOnNextHeartbeat();
  ASSERT_TRUE(router_.WaitFor([&](const auto& c) {
    return c[0].events.back().has_snapshot() && c[0].events.back().seq() > last;
  }));
  EXPECT_EQ(SnapshotTier(router_.connections()[0].events.back(), v1::KV_TIER_DEVICE),
            (std::set<std::uint64_t>{5}));
}

}  // namespace
}  // namespace tandem::worker
