#include "writer_slot.h"

namespace tandem::router {

void WriterSlot::Set(std::shared_ptr<http::SseWriter> writer) {
  absl::MutexLock lock(&mu_);
  if (writer_ == nullptr && !abandoned_) writer_ = std::move(writer);
}

void WriterSlot::Abandon() {
  absl::MutexLock lock(&mu_);
  if (writer_ == nullptr) abandoned_ = true;
}

std::shared_ptr<http::SseWriter> WriterSlot::Wait(const CallCanceller& canceller,
                                                  absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return writer_ != nullptr || abandoned_;
  };
  // The canceller has no way to wake us, so look at it every few milliseconds.
  while (!settled() && !canceller.cancelled() && absl::Now() < deadline) {
    mu_.AwaitWithTimeout(absl::Condition(&settled), absl::Milliseconds(20));
  }
  return canceller.cancelled() ? nullptr : writer_;
}

}  // namespace tandem::router
