#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "async/executor.h"
#include "async/task.h"
#include "dispatch/call_canceller.h"
#include "router_metrics.h"
#include "tandem/routing/types.h"
#include "tandem/security/tls.h"
#include "tandem/v1/router_control.pb.h"
#include "tandem/v1/worker.grpc.pb.h"

namespace tandem::router {

using SteadyNow = std::function<std::chrono::steady_clock::time_point()>;

const char* RoleName(v1::WorkerRole role);

// Whether `prefill` may hand its KV to `decode`: the same KV block format (WorkerInfo.kv_layout_id:
// model, KV layout, block size). A handoff between different ones would write KV the decode reads
// as something else, so such a pair is never formed.
bool KvCompatible(const v1::WorkerInfo& prefill, const v1::WorkerInfo& decode);
// A compatible pair of the same rollout generation (WorkerInfo.generation), preferred over a
// compatible pair across generations.
bool SameGeneration(const v1::WorkerInfo& prefill, const v1::WorkerInfo& decode);

// One registration of one worker process (a new incarnation gets a new entry). `info` and the
// stub never change; liveness and load are the registry's, read through it.
class WorkerEntry {
 public:
  WorkerEntry(v1::WorkerInfo info, std::shared_ptr<grpc::Channel> channel);

  const v1::WorkerInfo& info() const { return info_; }
  const std::string& id() const { return info_.worker_id(); }
  v1::WorkerRole role() const { return info_.role(); }
  v1::Worker::Stub& stub() const { return *stub_; }
  // The same channel for the worker's other services (an encoder's tandem.v1.Encoder).
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  int router_in_flight() const { return in_flight_.load(); }

 private:
  friend class WorkerRegistry;
  // A Worker.Cancel the worker has not heard yet: sent while it was down, or lost on the way.
  struct OwedCancel {
    std::string request_id;
    int sends = 0;
  };
  void Owe(OwedCancel cancel);
  std::deque<OwedCancel> TakeOwed();

  const v1::WorkerInfo info_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<v1::Worker::Stub> stub_;
  std::atomic<int> in_flight_{0};
  // Guarded by the registry's mutex.
  bool up_ = true;
  // Set by the first heartbeat that says so, never cleared: a drain is not undone (a new process
  // registers a new incarnation). No new work goes to a draining worker; it stays up.
  bool draining_ = false;
  std::chrono::steady_clock::time_point last_seen_;
  std::chrono::steady_clock::time_point down_since_;
  v1::WorkerLoad load_;
  std::vector<CallCanceller*> watchers_;
  metrics::Gauge* load_gauge_ = nullptr;
  metrics::Gauge* up_gauge_ = nullptr;
  metrics::Gauge* draining_gauge_ = nullptr;
  // Its own lock: the cancels' completions add to it from gRPC's threads, never under the
  // registry's.
  absl::Mutex owed_mu_;
  std::deque<OwedCancel> owed_ ABSL_GUARDED_BY(owed_mu_);
};

class WorkerRegistry;

// One request's claim on a worker: counts it in the worker's load and, should the worker go down
// meanwhile, cancels the request's calls so the client hears about it without waiting on TCP.
class WorkerLease {
 public:
  WorkerLease(WorkerRegistry* registry, std::shared_ptr<WorkerEntry> entry);
  ~WorkerLease();
  WorkerLease(const WorkerLease&) = delete;
  WorkerLease& operator=(const WorkerLease&) = delete;

  const WorkerEntry& worker() const { return *entry_; }
  // Cancels `canceller` when the worker goes down, until the lease ends. At most one.
  void Watch(CallCanceller* canceller);

  // Routing accounting. The prefill hook runs once: with the worker's answer when the dispatcher
  // reports one (PrefillDone), else with null when the lease ends; the release hook when it ends.
  void SetPrefillHook(std::function<void(const v1::PrefillResponse*)> hook) {
    prefill_hook_ = std::move(hook);
  }
  void SetReleaseHook(std::function<void()> hook) { release_hook_ = std::move(hook); }
  void PrefillDone(const v1::PrefillResponse& response);
  // The router may hold a prefill until the worker is free (PrefixRouter's hold queue): the
  // dispatcher waits on the gate before it starts the prefill. OK at once without a gate; else the
  // gate's answer (the canceller's reason, DEADLINE_EXCEEDED). A held prefill may have been moved
  // to another worker meanwhile (a prefill worker that fell idle took it over): the lease then
  // moves there (load, watch) and `moved_cached_tokens` is the new worker's predicted cache hit.
  struct Moved {
    std::shared_ptr<WorkerEntry> to;
    std::int64_t predicted_cached_tokens = 0;
  };
  // What the gate let through: where the prefill goes (moved or not) and how many prompt tokens
  // its own pieces (PrefixRouter's rule 11) left cached on that worker, which the worker counts
  // as cached and the request's usage must not.
  struct Started {
    std::optional<Moved> moved;
    std::int64_t own_piece_tokens = 0;
  };
  using StartGate = std::function<async::Task<absl::StatusOr<Started>>(
      async::Executor*, CallCanceller*, std::chrono::system_clock::time_point)>;
  void SetStartGate(StartGate gate) { start_gate_ = std::move(gate); }
  async::Task<absl::Status> Start(async::Executor* executor, CallCanceller* canceller,
                                  std::chrono::system_clock::time_point deadline);
  std::optional<std::int64_t> moved_cached_tokens() const { return moved_cached_tokens_; }
  std::int64_t own_piece_tokens() const { return own_piece_tokens_; }

 private:
  WorkerRegistry* registry_;
  std::shared_ptr<WorkerEntry> entry_;
  CallCanceller* watched_ = nullptr;
  std::function<void(const v1::PrefillResponse*)> prefill_hook_;
  std::function<void()> release_hook_;
  StartGate start_gate_;
  std::optional<std::int64_t> moved_cached_tokens_;
  std::int64_t own_piece_tokens_ = 0;
};

// A healthy candidate and its load: router in-flight plus the last reported running + waiting.
struct WorkerView {
  std::shared_ptr<WorkerEntry> entry;
  int load = 0;
};

// The workers the router knows, keyed by worker id. Thread-safe.
class WorkerRegistry {
 public:
  struct Options {
    int kv_block_size = 16;
    std::string kv_hash_scheme = routing::kKvHashScheme;
    int lease_ms = 3000;
    // A worker down this long (no heartbeat since its lease ran out) is forgotten, its series
    // deleted, as if it had deregistered: a process that died without deregistering leaves no
    // frozen gauge. 0: kForgetAfterLeases leases.
    int forget_after_ms = 0;
    SteadyNow now = [] { return std::chrono::steady_clock::now(); };
    const RouterMetrics* metrics = nullptr;  // optional
    security::TlsConfig tls;  // how the router dials workers (mutual TLS when configured)
    std::chrono::milliseconds cancel_timeout{1000};  // per Worker.Cancel call
  };
  static constexpr int kForgetAfterLeases = 10;
  // Owed cancels kept per worker (the oldest go first) and tries per cancel: a worker that misses
  // them still frees the requests when their streams or its KV reservation lease end.
  static constexpr std::size_t kMaxOwedCancels = 4096;
  static constexpr int kMaxCancelSends = 4;
  explicit WorkerRegistry(Options options);

  // FailedPrecondition for another KV block size, hash scheme or API major; InvalidArgument for missing fields.
  absl::StatusOr<v1::RegisterWorkerResponse> Register(const v1::RegisterWorkerRequest& request);
  // Register's checks alone: a request that passes them is registered (Register fails no other
  // way), so routing can take the worker in before the registry makes it visible.
  absl::Status Validate(const v1::RegisterWorkerRequest& request) const;
  // Asks for re-registration when the id or incarnation is unknown; revives a down worker.
  v1::HeartbeatResponse Heartbeat(const v1::HeartbeatRequest& request);

  // The worker leaves on purpose (RouterControl.DeregisterWorker): forgets that registration at
  // once, series included, and cancels what still runs on it (those generations migrate). Only
  // `incarnation`: false, and nothing changes, when the registration under `worker_id` is another
  // one (a newer process registered meanwhile) or there is none.
  bool Deregister(const std::string& worker_id, std::uint64_t incarnation,
                  const std::string& reason);

  // Workers new work may go to: healthy (lease valid), not draining, serving `model` in `role`,
  // after expiring stale leases.
  std::vector<WorkerView> Healthy(const std::string& model, v1::WorkerRole role);
  // Whether new work may still go to this registration now: it is the current one for its id, up
  // and not draining (a plan made earlier re-checks before it sends its first call).
  bool Placeable(const WorkerEntry& entry);
  std::unique_ptr<WorkerLease> Acquire(std::shared_ptr<WorkerEntry> entry);

  // Marks this registration down (a call to it failed); its next heartbeat brings it back.
  void MarkDown(const WorkerEntry& entry, const std::string& why);
  // Marks this registration draining (it refused new work for that reason) before its draining
  // heartbeat arrives: no new work goes to it; what it holds continues.
  void MarkDraining(const WorkerEntry& entry);
  // Marks down every worker whose last heartbeat is older than the lease.
  void ExpireLeases();

  // Tells this registration's worker to drop `request_id` (Worker.Cancel: its reservation, queued
  // prefill or stream), asynchronously. While the worker is down (a partition, or the lease ran
  // out) or when the call does not get through, the cancel is owed and sent again with the
  // worker's next heartbeat: a worker that was cut off lets go of what the router gave up as soon
  // as it is heard again, not when its KV reservation lease ends. Nothing for a registration that
  // was replaced or forgotten (its process is gone).
  void Cancel(const WorkerEntry& worker, const std::string& request_id);

  struct Readiness {
    bool ready = false;
    std::string reason;  // why not, when not
  };
  Readiness Ready(const std::string& model);

  // Up (lease valid), draining or not: a draining worker still serves what it holds.
  bool IsUp(const std::string& worker_id);
  bool IsDraining(const std::string& worker_id);
  // Whether a registration under this id is known (up, down, or draining).
  bool Knows(const std::string& worker_id);
  int lease_ms() const { return options_.lease_ms; }

 private:
  friend class WorkerLease;
  static bool SameRegistration(const v1::WorkerInfo& a, const v1::WorkerInfo& b);
  v1::RegisterWorkerResponse LeaseTerms() const;
  // Heard from the worker: up again if it was down, and what it is owed is sent.
  void Revive(const std::shared_ptr<WorkerEntry>& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendCancel(std::shared_ptr<WorkerEntry> entry, WorkerEntry::OwedCancel cancel) const;
  void ExpireLeasesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkDownLocked(WorkerEntry& entry, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkDrainingLocked(WorkerEntry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PublishLoadLocked(WorkerEntry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AttachMetricsLocked(WorkerEntry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the entry's child pointers and, with `remove_series`, deletes its series.
  void DetachMetricsLocked(WorkerEntry& entry, bool remove_series)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::chrono::milliseconds forget_after() const;
  void CountIn(WorkerEntry& entry);  // one more lease on it
  void Release(WorkerEntry& entry, CallCanceller* watched);
  void AddWatcher(WorkerEntry& entry, CallCanceller* canceller);

  const Options options_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<WorkerEntry>> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::router
