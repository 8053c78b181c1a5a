#include "admission/admission.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tandem::router {
namespace {

constexpr char kRetryAfterPayload[] = "tandem.router/retry-after";
// Below this many completions the service time is too noisy to refuse anyone on (a burst's first
// completions are its shortest generations).
constexpr int kMinCompletionsToPredict = 16;
// Weight of one completion in the service-time average: ~the last 50 generations.
constexpr double kServiceSmoothing = 0.02;

absl::Status Refusal(const std::string& why, std::chrono::milliseconds predicted_wait) {
  absl::Status st = absl::ResourceExhaustedError(why);
  SetRetryAfter(&st, std::chrono::ceil<std::chrono::seconds>(predicted_wait));
  return st;
}

}  // namespace

void SetRetryAfter(absl::Status* status, std::chrono::seconds after) {
  status->SetPayload(kRetryAfterPayload,
                     absl::Cord(absl::StrCat(std::max<long>(1, static_cast<long>(after.count())))));
}

long RetryAfterSeconds(const absl::Status& status) {
  const auto payload = status.GetPayload(kRetryAfterPayload);
  long seconds = 1;
  if (payload.has_value() && absl::SimpleAtoi(std::string(*payload), &seconds)) {
    return std::max<long>(1, seconds);
  }
  return 1;
}

AdmissionTicket::~AdmissionTicket() { admission_->Release(this); }

async::Task<absl::Status> AdmissionTicket::Turn(std::chrono::system_clock::time_point deadline) {
  co_return co_await admission_->AwaitGrant(this, deadline, /*bounded_by_queue_wait=*/false);
}

async::Task<absl::Status> AdmissionTicket::Requeue(std::chrono::system_clock::time_point deadline) {
  Admission& a = *admission_;
  bool back_off = false;
  {
    absl::MutexLock lock(&a.mu_);
    if (!running_) co_return absl::FailedPreconditionError("the generation is not running");
    running_ = false;
    --a.running_;
    ++refusals_;
    a.last_refusal_ = a.options_.now();
    // What the workers hold right now is the cluster's capacity: wait for a completion.
    a.limit_ = std::max(1.0, std::min(a.limit_, static_cast<double>(a.running_)));
    // Nothing else is out, so no completion will come to wake it: retry after a pause instead.
    back_off = a.running_ == 0;
    a.PublishLocked(a.options_.now());
  }
  if (back_off) {
    const auto pause = std::min<std::chrono::milliseconds>(
        std::chrono::milliseconds(1000),
        std::chrono::milliseconds(50 << std::min(refusals_ - 1, 5)));
    co_await async::Sleep(a.executor_, pause);
  }
  {
    absl::MutexLock lock(&a.mu_);
    if (absl::Status late = a.PastQueueBoundLocked(this); !late.ok()) {
      a.PublishLocked(a.options_.now());
      co_return late;
    }
    queued_ = true;
    a.queue_.push_front(this);  // it arrived before everything queued behind it
    a.GrantLocked();
    a.PublishLocked(a.options_.now());
  }
  co_return co_await a.AwaitGrant(this, deadline, /*bounded_by_queue_wait=*/true);
}

Admission::Admission(AdmissionOptions options, const RouterMetrics* metrics,
                     async::Executor* executor)
    : options_(std::move(options)),
      metrics_(metrics),
      executor_(executor),
      limit_(std::max(1, options_.max_in_flight)) {}

std::unique_ptr<AdmissionTicket> Admission::Admit(std::shared_ptr<CallCanceller> canceller,
                                                  absl::Status* refused) {
  absl::MutexLock lock(&mu_);
  const Clock::time_point now = options_.now();
  if (closed_) {
    *refused = absl::UnavailableError("the router is shutting down");
    return nullptr;
  }
  const bool place_free = running_ < static_cast<int>(limit_) && queue_.empty();
  if (!place_free) {
    const auto predicted = PredictLocked(queue_.size() + 1);
    const char* reason = nullptr;
    if (static_cast<int>(queue_.size()) >= options_.max_queue_length) {
      *refused = Refusal(absl::StrCat("the router's queue is full (", queue_.size(),
                                      " requests waiting); retry later"),
                         predicted);
      reason = "queue_full";
    } else if (predicted > options_.max_queue_wait) {
      *refused = Refusal(absl::StrCat("the predicted wait (", predicted.count() / 1000.0,
                                      " s) exceeds the router's queue bound of ",
                                      options_.max_queue_wait.count() / 1000.0, " s; retry later"),
                         predicted);
      reason = "queue_wait";
    }
    if (reason != nullptr) {
      if (metrics_ != nullptr) {
        if (auto c = metrics_->admission_refusals->WithLabels({reason}); c.ok()) (*c)->Increment();
      }
      return nullptr;
    }
  }
  std::unique_ptr<AdmissionTicket> ticket(new AdmissionTicket(this, std::move(canceller), now));
  tickets_.insert(ticket.get());
  if (place_free) {
    GrantTo(ticket.get());
  } else {
    ticket->queued_ = true;
    queue_.push_back(ticket.get());
  }
  PublishLocked(now);
  return ticket;
}

async::Task<absl::Status> Admission::AwaitGrant(AdmissionTicket* ticket,
                                                std::chrono::system_clock::time_point deadline,
                                                bool bounded_by_queue_wait) {
  // Woken by the grant, the client leaving, the deadline and the queue bound; each wake re-checks.
  std::shared_ptr<async::Event> wake = async::Event::Create(executor_);
  CallCanceller::Wake on_cancel(ticket->canceller_.get(), wake);
  async::Alarm at_deadline(wake, deadline);
  std::optional<async::Alarm> at_bound;
  if (bounded_by_queue_wait) {
    const Clock::duration left = ticket->arrived_ + options_.max_queue_wait - options_.now();
    at_bound.emplace(wake, Clock::now() + std::max(left, Clock::duration::zero()) +
                               std::chrono::milliseconds(1));
  }
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (ticket->running_) {
        ticket->wake_.reset();
        co_return absl::OkStatus();
      }
      absl::Status gave_up = ticket->canceller_->reason();
      if (gave_up.ok() && std::chrono::system_clock::now() >= deadline) {
        gave_up = absl::DeadlineExceededError("the request deadline passed while it was queued");
      }
      if (gave_up.ok() && bounded_by_queue_wait) gave_up = PastQueueBoundLocked(ticket);
      if (!gave_up.ok()) {
        ticket->wake_.reset();
        RemoveFromQueueLocked(ticket);
        PublishLocked(options_.now());
        co_return gave_up;
      }
      ticket->wake_ = wake;
    }
    co_await wake->Wait();
  }
}

absl::Status Admission::PastQueueBoundLocked(const AdmissionTicket* ticket) {
  if (options_.now() - ticket->arrived_ <= options_.max_queue_wait) return absl::OkStatus();
  if (metrics_ != nullptr) {
    if (auto c = metrics_->admission_refusals->WithLabels({"worker_capacity"}); c.ok()) {
      (*c)->Increment();
    }
  }
  return Refusal(absl::StrCat("the workers had no capacity for this request within the router's "
                              "queue bound of ",
                              options_.max_queue_wait.count() / 1000.0, " s; retry later"),
                 PredictLocked(queue_.size() + 1));
}

void Admission::Release(AdmissionTicket* ticket) {
  absl::MutexLock lock(&mu_);
  const Clock::time_point now = options_.now();
  tickets_.erase(ticket);
  if (ticket->running_) {
    ticket->running_ = false;
    --running_;
    const double service_s = std::chrono::duration<double>(now - ticket->started_).count();
    mean_service_s_ = completions_seen_ == 0
                          ? service_s
                          : mean_service_s_ + kServiceSmoothing * (service_s - mean_service_s_);
    ++completions_seen_;
    // Probe for capacity again: quickly while the workers have not refused lately, else one more
    // place per limit's worth of completions (additive increase).
    const bool refused_lately = now - last_refusal_ < std::chrono::seconds(1);
    const double step = refused_lately ? 1.0 / limit_ : 1.0;
    limit_ = std::min<double>(options_.max_in_flight, limit_ + step);
    GrantLocked();
  } else {
    RemoveFromQueueLocked(ticket);
  }
  PublishLocked(now);
}

void Admission::GrantTo(AdmissionTicket* ticket) {
  ticket->queued_ = false;
  ticket->running_ = true;
  ticket->started_ = options_.now();
  ++running_;
  if (ticket->wake_ != nullptr) ticket->wake_->Notify();
}

void Admission::GrantLocked() {
  while (running_ < static_cast<int>(limit_) && !queue_.empty()) {
    AdmissionTicket* next = queue_.front();
    queue_.pop_front();
    GrantTo(next);
  }
}

void Admission::RemoveFromQueueLocked(AdmissionTicket* ticket) {
  if (!ticket->queued_) return;
  ticket->queued_ = false;
  queue_.erase(std::find(queue_.begin(), queue_.end(), ticket));
}

std::chrono::milliseconds Admission::PredictLocked(std::size_t position) const {
  if (completions_seen_ < kMinCompletionsToPredict) return std::chrono::milliseconds(0);
  // `limit` generations run side by side: the queue moves one place per service time / limit.
  const double parallel = std::max(1.0, std::floor(limit_));
  const double seconds = mean_service_s_ * static_cast<double>(position) / parallel;
  return std::chrono::milliseconds(static_cast<std::int64_t>(1000.0 * seconds));
}

void Admission::PublishLocked(Clock::time_point now) {
  if (metrics_ == nullptr) return;
  metrics_->queue_depth->Set(static_cast<double>(queue_.size()));
  metrics_->active_requests->Set(static_cast<double>(running_));
  metrics_->admission_limit->Set(std::floor(limit_));
  metrics_->queue_predicted_wait_seconds->Set(PredictLocked(queue_.size() + 1).count() / 1e3);
}

void Admission::CloseAndCancelAll(absl::Status reason) {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  for (AdmissionTicket* ticket : tickets_) ticket->canceller_->Cancel(reason);
}

int Admission::active() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(tickets_.size());
}

int Admission::running() const {
  absl::MutexLock lock(&mu_);
  return running_;
}

int Admission::queued() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queue_.size());
}

int Admission::limit() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(limit_);
}

std::chrono::milliseconds Admission::PredictedWait() const {
  absl::MutexLock lock(&mu_);
  return PredictLocked(queue_.size() + 1);
}

}  // namespace tandem::router
