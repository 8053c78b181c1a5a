#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <condition_variable>

#include "absl/container/flat_hash_map.h"
#include "kv_event_publisher.h"
#include "tandem/rpc/router_link.h"
#include "tandem/engine/block_manager.h"
#include "tandem/kv/tiered_kv_store.h"

namespace tandem::worker {

using rpc::RouterLink;

struct RouterFanoutOptions {
  // --router: "host:port[,host:port...]". Each host may resolve to several addresses (a
  // Kubernetes headless Service has one per router pod); every address is a router to join.
  std::string routers;
  std::chrono::milliseconds resolve_interval{5000};
  int heartbeat_ms = 1000;
  v1::WorkerInfo info;
  RouterLink::LoadFn load;
  KvEventPublisherOptions publisher;  // worker id and incarnation; copied per router
  kv::TieredKvStore* store = nullptr;  // may be null (no lower tiers)
  security::TlsConfig tls;  // how routers are dialled (mutual TLS when configured)
  // Tests: replaces DNS (returns the addresses to join now).
  std::function<std::set<std::string>()> resolve;
};

// Keeps this worker known to every router replica: one registration (RouterLink) and one KV event
// stream (KvEventPublisher) per router address, joined when the address appears (resolved again
// every resolve_interval) and left when it goes. Each router then has every worker, with its
// load and its KV blocks, instead of the one the gRPC resolver happened to pick.
//
// Device KV events come in on the engine thread (OnDeviceEvent) and go to every stream. A stream
// opened later starts from a mirror of the device blocks this class keeps; it is created on the
// engine thread (`run_on_engine`), so no event falls between the copy and its start.
class RouterFanout {
 public:
  // Runs `fn` on the engine thread between steps and waits for it; runs it in place when the
  // engine has stopped (then no device event can race it either).
  using RunOnEngine = std::function<void(const std::function<void()>& fn)>;

  RouterFanout(RouterFanoutOptions options, RunOnEngine run_on_engine);
  ~RouterFanout();
  // Joins the routers resolved now, then follows the resolution every resolve_interval. Call it
  // once the engine's device events reach OnDeviceEvent, so none is missed.
  void Start();
  // Stops following the resolution (idempotent); the routers joined stay joined. Before the
  // engine loop that run_on_engine uses goes away.
  void StopResolving();
  // StopResolving, then leaves every router: heartbeats and KV streams stop (threads joined).
  // Before the objects the load callback reads go away; device events are then ignored.
  void Shutdown();
  RouterFanout(const RouterFanout&) = delete;
  RouterFanout& operator=(const RouterFanout&) = delete;

  void OnDeviceEvent(const engine::KvCacheEvent& event);  // engine thread; cheap
  // Registered with at least one router (what /ready requires).
  bool registered() const;
  int routers() const;
  int registered_routers() const;
  void HeartbeatNow();  // every router hears the current load (the draining flag) now
  // Stops re-resolving and deregisters from every router in parallel; how many accepted.
  int Deregister(const std::string& reason);
  KvEventPublisherStats publisher_stats() const;  // summed over the routers

  // "host:port[,...]" resolved with the system resolver: "ip:port" / "[ipv6]:port" strings.
  // A host that does not resolve contributes nothing (its previous addresses are kept by Run).
  static std::map<std::string, std::set<std::string>> ResolveAll(const std::string& routers);

 private:
  struct Peer {
    std::unique_ptr<KvEventPublisher> publisher;
    std::unique_ptr<RouterLink> link;
  };
  void Run();
  void Sync(const std::set<std::string>& addresses);
  std::set<std::string> Resolve();

  const RouterFanoutOptions options_;
  const RunOnEngine run_on_engine_;

  mutable std::mutex mu_;  // peers_ and device_
  std::map<std::string, std::shared_ptr<Peer>> peers_;
  absl::flat_hash_map<std::uint64_t, int> device_;  // hash -> copies, as the publishers count
  std::map<std::string, std::set<std::string>> last_resolved_;  // resolver thread only

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tandem::worker
