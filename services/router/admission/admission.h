#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "async/event.h"
#include "async/executor.h"
#include "async/task.h"
#include "dispatch/call_canceller.h"
#include "router_metrics.h"

namespace tandem::router {

class Admission;

struct AdmissionOptions {
  // Generations out on workers at once. The effective limit adapts below it: a worker that
  // refuses for capacity lowers it to what the cluster holds, completions raise it again.
  int max_in_flight = 512;
  // Generations waiting for a place; beyond it new ones are refused (429). 0: never queue.
  int max_queue_length = 4096;
  // A new generation is refused when its predicted wait exceeds this, and a queued one that
  // workers keep refusing gives up after waiting this long.
  std::chrono::milliseconds max_queue_wait{30000};
  std::function<std::chrono::steady_clock::time_point()> now = [] {
    return std::chrono::steady_clock::now();
  };
};

// One generation's place: queued until AwaitTurn grants it, then running until the ticket ends.
// Destruction frees whatever it holds, on every path.
class AdmissionTicket {
 public:
  ~AdmissionTicket();
  AdmissionTicket(const AdmissionTicket&) = delete;
  AdmissionTicket& operator=(const AdmissionTicket&) = delete;

  // Completes when the generation may go to the workers. Errors: the canceller's reason,
  // DEADLINE_EXCEEDED past `deadline`.
  async::Task<absl::Status> Turn(std::chrono::system_clock::time_point deadline);
  // A worker refused the running generation for capacity before it produced anything: its place
  // goes back, the cluster's limit drops to what it holds now, and the generation waits at the
  // head of the queue for the next free place. RESOURCE_EXHAUSTED (with a retry hint) once it has
  // waited longer than the queue bound since it arrived; the canceller's reason when cancelled.
  async::Task<absl::Status> Requeue(std::chrono::system_clock::time_point deadline);

 private:
  friend class Admission;
  AdmissionTicket(Admission* admission, std::shared_ptr<CallCanceller> canceller,
                  std::chrono::steady_clock::time_point arrived)
      : admission_(admission), canceller_(std::move(canceller)), arrived_(arrived) {}

  Admission* admission_;
  std::shared_ptr<CallCanceller> canceller_;
  const std::chrono::steady_clock::time_point arrived_;
  // Guarded by the admission's mutex.
  bool running_ = false;
  bool queued_ = false;
  std::chrono::steady_clock::time_point started_{};  // when it last got a place
  int refusals_ = 0;
  std::shared_ptr<async::Event> wake_;  // set while a coroutine waits for the grant
};

// The router's admission queue: bounds the generations out on workers, queues the rest in
// arrival order (a refused retry goes first), and refuses only when waiting is unreasonable: the
// predicted wait is past --max-queue-wait or the queue is full. Refusals carry a Retry-After
// hint. Can cancel everything (shutdown). Owns the admission gauges. Thread-safe.
class Admission {
 public:
  // Waiting generations resume on `executor`.
  Admission(AdmissionOptions options, const RouterMetrics* metrics, async::Executor* executor);

  // A ticket (running at once or queued), or null with the reason: RESOURCE_EXHAUSTED when
  // waiting is unreasonable, UNAVAILABLE after Close.
  std::unique_ptr<AdmissionTicket> Admit(std::shared_ptr<CallCanceller> canceller,
                                         absl::Status* refused);
  // Refuses new generations and cancels the admitted ones (queued or running) with `reason`.
  void CloseAndCancelAll(absl::Status reason);

  int active() const;    // running + queued
  int running() const;
  int queued() const;
  int limit() const;     // the effective in-flight limit now
  // The wait a generation arriving now would be predicted (0 until enough generations completed
  // to know how long they take).
  std::chrono::milliseconds PredictedWait() const;

 private:
  friend class AdmissionTicket;
  using Clock = std::chrono::steady_clock;
  async::Task<absl::Status> AwaitGrant(AdmissionTicket* ticket,
                                       std::chrono::system_clock::time_point deadline,
                                       bool bounded_by_queue_wait);
  void Release(AdmissionTicket* ticket);
  // RESOURCE_EXHAUSTED (counted, with a retry hint) once `ticket` has waited past the bound.
  absl::Status PastQueueBoundLocked(const AdmissionTicket* ticket)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void GrantLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveFromQueueLocked(AdmissionTicket* ticket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void GrantTo(AdmissionTicket* ticket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::chrono::milliseconds PredictLocked(std::size_t position) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PublishLocked(Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AdmissionOptions options_;
  const RouterMetrics* metrics_;
  async::Executor* const executor_;
  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  double limit_ ABSL_GUARDED_BY(mu_) = 0;
  Clock::time_point last_refusal_ ABSL_GUARDED_BY(mu_){};
  std::deque<AdmissionTicket*> queue_ ABSL_GUARDED_BY(mu_);
  // How long generations hold a place (moving average over completions): with the limit, it
  // says how fast the queue moves.
  double mean_service_s_ ABSL_GUARDED_BY(mu_) = 0;
  int completions_seen_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_set<AdmissionTicket*> tickets_ ABSL_GUARDED_BY(mu_);
};

// A refusal's Retry-After hint travels in the status as a payload, so that every protocol's
// error response can say it.
void SetRetryAfter(absl::Status* status, std::chrono::seconds after);
// The hint in seconds, at least 1; 1 when the status carries none.
long RetryAfterSeconds(const absl::Status& status);

}  // namespace tandem::router
