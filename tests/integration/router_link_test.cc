// The worker's half of the drain protocol against an in-process RouterControl server (real
// gRPC): the draining flag reaches the router without waiting for the heartbeat interval, and
// DeregisterWorker names this incarnation and ends the heartbeats; a router without the call
// leaves the worker to its lease (docs/deployment.md, "Drain").

#include <chrono>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "in_process_server.h"
#include "tandem/rpc/router_link.h"

namespace tandem::worker {
namespace {

using rpc::RouterLink;

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Registration and heartbeats only, as a router that predates DeregisterWorker.
class OldRouter : public v1::RouterControl::Service {
 public:
  grpc::Status RegisterWorker(grpc::ServerContext*, const v1::RegisterWorkerRequest*,
                              v1::RegisterWorkerResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++registrations_;
    response->set_heartbeat_interval_ms(heartbeat_ms_);
    cv_.notify_all();
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse*) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++heartbeats_;
    if (request->load().draining() && !draining_seen_) {
      draining_seen_ = true;
      draining_at_ = Clock::now();
    }
    cv_.notify_all();
    return grpc::Status::OK;
  }
  template <typename Pred>
  bool WaitFor(Pred pred, milliseconds timeout = milliseconds(5000)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(); });
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::uint32_t heartbeat_ms_ = 10000;  // far longer than any wait below
  int registrations_ = 0;
  int heartbeats_ = 0;
  bool draining_seen_ = false;
  Clock::time_point draining_at_;
};

class NewRouter final : public OldRouter {
 public:
  grpc::Status DeregisterWorker(grpc::ServerContext*, const v1::DeregisterWorkerRequest* request,
                                v1::DeregisterWorkerResponse*) override {
    std::lock_guard<std::mutex> lock(mu_);
    deregistered_ = *request;
    cv_.notify_all();
    return grpc::Status::OK;
  }
  v1::DeregisterWorkerRequest deregistered_;
};

using Server = testing::InProcessServer;

// registered() flips after the router answered, with nothing to wait on: poll it.
bool WaitRegistered(const RouterLink& link) {
  const auto deadline = Clock::now() + milliseconds(5000);
  while (!link.registered() && Clock::now() < deadline) std::this_thread::sleep_for(milliseconds(5));
  return link.registered();
}

v1::WorkerInfo Info() {
  v1::WorkerInfo info;
  info.set_worker_id("decode-7");
  info.set_incarnation(4242);
  return info;
}

TEST(RouterLinkDrainTest, DrainingReachesTheRouterWithoutWaitingForTheInterval) {
  NewRouter router;
  Server server(&router);
  std::atomic<bool> draining{false};
  RouterLink link(server.address(), Info(), 10000, [&] {
    v1::WorkerLoad load;
    load.set_draining(draining.load());
    return load;
  });
  ASSERT_TRUE(WaitRegistered(link));
  const auto start = Clock::now();
  draining = true;
  link.HeartbeatNow();
  ASSERT_TRUE(router.WaitFor([&] { return router.draining_seen_; }, milliseconds(3000)))
      << "the draining heartbeat waited for the 10 s interval";
  EXPECT_LT(router.draining_at_ - start, milliseconds(2000));
}

TEST(RouterLinkDrainTest, DeregisterNamesThisIncarnationAndEndsTheHeartbeats) {
  NewRouter router;
  router.heartbeat_ms_ = 20;
  Server server(&router);
  RouterLink link(server.address(), Info(), 20, [] { return v1::WorkerLoad(); });
  ASSERT_TRUE(router.WaitFor([&] { return router.heartbeats_ >= 2; }));
  EXPECT_TRUE(link.Deregister("drained"));
  EXPECT_FALSE(link.registered());
  {
    std::lock_guard<std::mutex> lock(router.mu_);
    EXPECT_EQ(router.deregistered_.worker_id(), "decode-7");
    EXPECT_EQ(router.deregistered_.incarnation(), 4242u);
    EXPECT_EQ(router.deregistered_.reason(), "drained");
  }
  int heartbeats, registrations;
  {
    std::lock_guard<std::mutex> lock(router.mu_);
    heartbeats = router.heartbeats_;
    registrations = router.registrations_;
  }
  std::this_thread::sleep_for(milliseconds(200));  // ten intervals
  std::lock_guard<std::mutex> lock(router.mu_);
  EXPECT_EQ(router.heartbeats_, heartbeats) << "heartbeats after deregistering";
  EXPECT_EQ(router.registrations_, registrations) << "re-registered after deregistering";
}

TEST(RouterLinkDrainTest, ARouterWithoutTheCallLeavesTheWorkerToItsLease) {
  OldRouter router;
  Server server(&router);
  RouterLink link(server.address(), Info(), 10000, [] { return v1::WorkerLoad(); });
  ASSERT_TRUE(WaitRegistered(link));
  EXPECT_FALSE(link.Deregister("drained")) << "UNIMPLEMENTED must not count as deregistered";
}

TEST(RouterLinkDrainTest, DeregisterBeforeEverRegisteringSendsNothing) {
  NewRouter router;
  Server server(&router);
  // Nothing listens here: registration keeps failing.
  RouterLink link("127.0.0.1:1", Info(), 10000, [] { return v1::WorkerLoad(); });
  EXPECT_FALSE(link.Deregister("drained"));
}

}  // namespace
}  // namespace tandem::worker
