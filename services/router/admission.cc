#include "admission.h"

#include "absl/strings/str_cat.h"

namespace tandem::router {

AdmissionTicket::AdmissionTicket(Admission* admission, std::shared_ptr<CallCanceller> canceller)
    : admission_(admission), canceller_(std::move(canceller)) {}

AdmissionTicket::~AdmissionTicket() { admission_->Release(canceller_.get(), queued_); }

void AdmissionTicket::Started() {
  if (!queued_) return;
  queued_ = false;
  admission_->LeaveQueue();
}

Admission::Admission(int max_in_flight, const RouterMetrics* metrics)
    : max_in_flight_(max_in_flight), metrics_(metrics) {}

std::unique_ptr<AdmissionTicket> Admission::Admit(std::shared_ptr<CallCanceller> canceller,
                                                  absl::Status* refused) {
  absl::MutexLock lock(&mu_);
  if (closed_) {
    *refused = absl::UnavailableError("the router is shutting down");
    return nullptr;
  }
  if (static_cast<int>(active_.size()) >= max_in_flight_) {
    *refused = absl::ResourceExhaustedError(absl::StrCat(
        "the router is at its limit of ", max_in_flight_, " requests in flight; retry later"));
    return nullptr;
  }
  active_.emplace(canceller.get(), canceller);
  if (metrics_ != nullptr) {
    metrics_->active_requests->Increment();
    metrics_->queue_depth->Increment();
  }
  return std::make_unique<AdmissionTicket>(this, std::move(canceller));
}

void Admission::Release(CallCanceller* canceller, bool queued) {
  absl::MutexLock lock(&mu_);
  active_.erase(canceller);
  if (metrics_ != nullptr) {
    metrics_->active_requests->Decrement();
    if (queued) metrics_->queue_depth->Decrement();
  }
}

void Admission::LeaveQueue() {
  if (metrics_ != nullptr) metrics_->queue_depth->Decrement();
}

void Admission::CloseAndCancelAll(absl::Status reason) {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  for (const auto& [raw, canceller] : active_) canceller->Cancel(reason);
}

int Admission::active() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(active_.size());
}

}  // namespace tandem::router
