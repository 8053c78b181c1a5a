#pragma once

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "call_canceller.h"
#include "router_metrics.h"

namespace tandem::router {

class Admission;

// One admitted generation. Releasing it (destruction) frees its slot, on every path.
class AdmissionTicket {
 public:
  AdmissionTicket(Admission* admission, std::shared_ptr<CallCanceller> canceller);
  ~AdmissionTicket();
  AdmissionTicket(const AdmissionTicket&) = delete;
  AdmissionTicket& operator=(const AdmissionTicket&) = delete;

  // The generation left the queue: its first worker call is about to start.
  void Started();

 private:
  Admission* admission_;
  std::shared_ptr<CallCanceller> canceller_;
  bool queued_ = true;
};

// Bounds the generations in flight (beyond: the caller answers 429) and can cancel them all
// (shutdown). Owns the active_requests and queue_depth gauges. Thread-safe.
class Admission {
 public:
  Admission(int max_in_flight, const RouterMetrics* metrics);

  // Null when max_in_flight generations are running or after Close: the reason says which.
  std::unique_ptr<AdmissionTicket> Admit(std::shared_ptr<CallCanceller> canceller,
                                         absl::Status* refused);
  // Refuses new generations and cancels the running ones with `reason`.
  void CloseAndCancelAll(absl::Status reason);
  int active() const;

 private:
  friend class AdmissionTicket;
  void Release(CallCanceller* canceller, bool queued);
  void LeaveQueue();

  const int max_in_flight_;
  const RouterMetrics* metrics_;
  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<CallCanceller*, std::shared_ptr<CallCanceller>> active_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::router
