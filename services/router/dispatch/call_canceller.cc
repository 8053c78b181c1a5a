#include "dispatch/call_canceller.h"

#include <algorithm>

namespace tandem::router {

void CallCanceller::Cancel(absl::Status reason) {
  absl::MutexLock lock(&mu_);
  if (!reason_.ok()) return;
  reason_ = reason.ok() ? absl::CancelledError("cancelled") : std::move(reason);
  // TryCancel only flags the call; it never blocks, so holding the lock is fine.
  for (grpc::ClientContext* call : calls_) call->TryCancel();
  for (CallCanceller* follower : followers_) follower->Cancel(reason_);
  for (async::Event* event : wakes_) event->Notify();  // only posts the waiter's resumption
}

CallCanceller::Wake::Wake(CallCanceller* canceller, std::shared_ptr<async::Event> event)
    : canceller_(canceller), event_(std::move(event)) {
  absl::MutexLock lock(&canceller_->mu_);
  if (!canceller_->reason_.ok()) event_->Notify();
  canceller_->wakes_.push_back(event_.get());
}

CallCanceller::Wake::~Wake() {
  absl::MutexLock lock(&canceller_->mu_);
  auto& wakes = canceller_->wakes_;
  wakes.erase(std::remove(wakes.begin(), wakes.end(), event_.get()), wakes.end());
}

CallCanceller::Follow::Follow(CallCanceller* leader, CallCanceller* follower)
    : leader_(leader), follower_(follower) {
  absl::MutexLock lock(&leader_->mu_);
  if (!leader_->reason_.ok()) follower_->Cancel(leader_->reason_);
  leader_->followers_.push_back(follower_);
}

CallCanceller::Follow::~Follow() {
  absl::MutexLock lock(&leader_->mu_);
  auto& followers = leader_->followers_;
  followers.erase(std::remove(followers.begin(), followers.end(), follower_), followers.end());
}

bool CallCanceller::cancelled() const {
  absl::MutexLock lock(&mu_);
  return !reason_.ok();
}

absl::Status CallCanceller::reason() const {
  absl::MutexLock lock(&mu_);
  return reason_;
}

CallCanceller::Scope::Scope(CallCanceller* canceller, grpc::ClientContext* context)
    : canceller_(canceller), context_(context) {
  absl::MutexLock lock(&canceller_->mu_);
  // A context cancelled before its call starts cancels the call as soon as it does.
  if (!canceller_->reason_.ok()) context_->TryCancel();
  canceller_->calls_.push_back(context_);
}

CallCanceller::Scope::~Scope() {
  absl::MutexLock lock(&canceller_->mu_);
  auto& calls = canceller_->calls_;
  calls.erase(std::remove(calls.begin(), calls.end(), context_), calls.end());
}

}  // namespace tandem::router
