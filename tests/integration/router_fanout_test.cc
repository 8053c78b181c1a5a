// A worker behind several router replicas (a Kubernetes headless Service): it registers with
// every one, streams its KV blocks to every one, joins a replica that appears later with the
// blocks announced before it came, leaves one that goes away, and deregisters from all. In-process
// RouterControl servers over real gRPC; the engine thread is simulated by the caller.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "in_process_server.h"
#include "router_fanout.h"

namespace tandem::worker {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// One router replica: what it was told, per worker.
class Replica final : public v1::RouterControl::Service {
 public:
  grpc::Status RegisterWorker(grpc::ServerContext*, const v1::RegisterWorkerRequest*,
                              v1::RegisterWorkerResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++registrations_;
    response->set_heartbeat_interval_ms(50);
    cv_.notify_all();
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse*) override {
    std::lock_guard<std::mutex> lock(mu_);
    draining_ |= request->load().draining();
    cv_.notify_all();
    return grpc::Status::OK;
  }
  grpc::Status DeregisterWorker(grpc::ServerContext*, const v1::DeregisterWorkerRequest*,
                                v1::DeregisterWorkerResponse*) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++deregistrations_;
    cv_.notify_all();
    return grpc::Status::OK;
  }
  // Keeps the device blocks the stream announced (snapshots replace, deltas add and remove).
  grpc::Status PublishKvEvents(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::KvEventAck, v1::KvEventBatch>* stream) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++streams_;
    }
    v1::KvEventBatch batch;
    while (stream->Read(&batch)) {
      std::lock_guard<std::mutex> lock(mu_);
      for (const v1::KvEvent& e : batch.events()) {
        if (e.has_snapshot()) {
          device_.clear();
          for (const auto& t : e.snapshot().tiers()) {
            if (t.tier() == v1::KV_TIER_DEVICE) device_.insert(t.block_hashes().begin(), t.block_hashes().end());
          }
        } else if (e.has_stored() && e.stored().tier() == v1::KV_TIER_DEVICE) {
          device_.insert(e.stored().block_hashes().begin(), e.stored().block_hashes().end());
        } else if (e.has_removed() && e.removed().tier() == v1::KV_TIER_DEVICE) {
          for (std::uint64_t h : e.removed().block_hashes()) device_.erase(h);
        }
      }
      v1::KvEventAck ack;
      ack.set_acked_seq(batch.events(batch.events_size() - 1).seq());
      stream->Write(ack);
      cv_.notify_all();
    }
    return grpc::Status::OK;
  }
  template <typename Pred>
  bool WaitFor(Pred pred, milliseconds timeout = milliseconds(5000)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(); });
  }

  std::mutex mu_;
  std::condition_variable cv_;
  int registrations_ = 0;
  int deregistrations_ = 0;
  int streams_ = 0;
  bool draining_ = false;
  std::set<std::uint64_t> device_;
};

using Server = testing::InProcessServer;

engine::KvCacheEvent Stored(std::uint64_t hash) {
  engine::KvCacheEvent e;
  e.kind = engine::KvCacheEvent::Kind::kStored;
  e.block_hash = hash;
  return e;
}

class RouterFanoutTest : public ::testing::Test {
 protected:
  std::unique_ptr<RouterFanout> Make(std::function<std::set<std::string>()> resolve,
                                     std::string routers = "") {
    RouterFanoutOptions o;
    o.routers = std::move(routers);
    o.resolve = std::move(resolve);
    o.resolve_interval = milliseconds(50);
    o.heartbeat_ms = 50;
    o.info.set_worker_id("prefill-1");
    o.info.set_incarnation(9);
    o.load = [this] {
      v1::WorkerLoad load;
      load.set_draining(draining_.load());
      return load;
    };
    o.publisher.worker_id = "prefill-1";
    o.publisher.incarnation = 9;
    // The test thread plays the engine thread: events and publisher creation never overlap
    // because both take engine_mu_.
    auto fanout = std::make_unique<RouterFanout>(std::move(o), [this](const std::function<void()>& fn) {
      std::lock_guard<std::mutex> lock(engine_mu_);
      fn();
    });
    fanout->Start();
    return fanout;
  }
  void Event(RouterFanout& f, const engine::KvCacheEvent& e) {
    std::lock_guard<std::mutex> lock(engine_mu_);
    f.OnDeviceEvent(e);
  }

  std::mutex engine_mu_;
  std::atomic<bool> draining_{false};
};

TEST_F(RouterFanoutTest, EveryReplicaHasTheWorkerItsBlocksAndItsDrainingFlag) {
  Replica a, b;
  Server sa(&a), sb(&b);
  // Both in one --router value, as a comma list of literal addresses (no DNS involved).
  auto fanout = Make(nullptr, sa.address() + "," + sb.address());
  EXPECT_EQ(fanout->routers(), 2);
  for (Replica* r : {&a, &b}) {
    ASSERT_TRUE(r->WaitFor([&] { return r->registrations_ >= 1 && r->streams_ >= 1; }));
  }
  Event(*fanout, Stored(11));
  Event(*fanout, Stored(12));
  for (Replica* r : {&a, &b}) {
    EXPECT_TRUE(r->WaitFor([&] { return r->device_ == std::set<std::uint64_t>{11, 12}; }));
  }
  draining_ = true;
  fanout->HeartbeatNow();
  for (Replica* r : {&a, &b}) EXPECT_TRUE(r->WaitFor([&] { return r->draining_; }));
  EXPECT_EQ(fanout->Deregister("drained"), 2);
  for (Replica* r : {&a, &b}) EXPECT_EQ(r->deregistrations_, 1);
}

TEST_F(RouterFanoutTest, AReplicaThatAppearsLaterGetsTheBlocksAnnouncedBeforeIt) {
  Replica a, b;
  Server sa(&a), sb(&b);
  std::mutex mu;
  std::set<std::string> addresses = {sa.address()};
  auto resolve = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return addresses;
  };
  auto fanout = Make(resolve);
  ASSERT_TRUE(a.WaitFor([&] { return a.streams_ >= 1; }));
  Event(*fanout, Stored(21));
  ASSERT_TRUE(a.WaitFor([&] { return a.device_.count(21) == 1; }));
  {
    std::lock_guard<std::mutex> lock(mu);
    addresses.insert(sb.address());  // a router pod scheduled: the headless Service lists it
  }
  ASSERT_TRUE(b.WaitFor([&] { return b.registrations_ >= 1; }));
  EXPECT_TRUE(b.WaitFor([&] { return b.device_ == std::set<std::uint64_t>{21}; }))
      << "the new replica's first snapshot lacks a block stored before it appeared";
  Event(*fanout, Stored(22));
  EXPECT_TRUE(b.WaitFor([&] { return b.device_ == std::set<std::uint64_t>{21, 22}; }));

  {
    std::lock_guard<std::mutex> lock(mu);
    addresses.erase(sa.address());  // that router pod is gone
  }
  const auto deadline = Clock::now() + milliseconds(5000);
  while (fanout->routers() != 1 && Clock::now() < deadline) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(fanout->routers(), 1);
  EXPECT_EQ(fanout->Deregister("drained"), 1);
  EXPECT_EQ(b.deregistrations_, 1);
  EXPECT_EQ(a.deregistrations_, 0);
}

TEST_F(RouterFanoutTest, ResolvesNamesToOneFamilyAndSkipsWhatDoesNotParse) {
  auto all = RouterFanout::ResolveAll("127.0.0.1:50051, [::1]:7, localhost:9, nonsense");
  EXPECT_EQ(all["127.0.0.1:50051"], (std::set<std::string>{"127.0.0.1:50051"}));
  EXPECT_EQ(all["[::1]:7"], (std::set<std::string>{"[::1]:7"}));
  // localhost is 127.0.0.1 and ::1 on most hosts: joined once, over IPv4.
  ASSERT_EQ(all["localhost:9"].size(), 1u);
  EXPECT_EQ(*all["localhost:9"].begin(), "127.0.0.1:9");
  EXPECT_EQ(all.count("nonsense"), 0u);
}

}  // namespace
}  // namespace tandem::worker
