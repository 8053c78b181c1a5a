#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "tandem/security/tls.h"
#include "tandem/v1/router_control.grpc.pb.h"

namespace tandem::rpc {

// Keeps a worker (prefill, decode, combined or encoder) registered with the router: registers, heartbeats with the current load, and
// re-registers when the router says it does not know us (it restarted) or after errors, with
// capped backoff. Runs on its own thread; stops in the destructor.
class RouterLink {
 public:
  using LoadFn = std::function<v1::WorkerLoad()>;
  // KV event sync riding on registration and heartbeats (both optional).
  struct KvSync {
    std::function<std::uint64_t()> last_event_seq;  // reported in every heartbeat
    // The router lost track of our KV events (it said so, or we registered anew).
    std::function<void()> resend_snapshot;
  };
  // `tls`: how the router is dialled (mutual TLS when configured; default: plaintext).
  RouterLink(std::string router_address, v1::WorkerInfo info, int heartbeat_ms, LoadFn load,
             KvSync kv_sync = {}, const security::TlsConfig& tls = {});
  ~RouterLink();

  bool registered() const { return registered_.load(); }
  // Sends a heartbeat now instead of at the next interval: the drain has started and the load
  // (which says so) must reach the router before it places more work here.
  void HeartbeatNow();
  // Stops heartbeating and tells the router we are leaving on purpose (DeregisterWorker), so it
  // forgets us now instead of when the lease runs out. False when the router did not take it
  // (unreachable, or too old to know the call): the lease then removes us.
  bool Deregister(const std::string& reason);

 private:
  void Run();
  bool Register();
  bool Heartbeat();
  bool SleepFor(std::chrono::milliseconds d);  // false when stopping; cut short by HeartbeatNow
  void Stop();

  const std::string router_address_;
  const v1::WorkerInfo info_;
  int heartbeat_ms_;
  const LoadFn load_;
  const KvSync kv_sync_;
  std::unique_ptr<v1::RouterControl::Stub> stub_;
  std::atomic<bool> registered_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool wake_ = false;  // HeartbeatNow() was called
  std::thread thread_;
};

}  // namespace tandem::rpc
