#include "api/http/writer_slot.h"

namespace tandem::router {

void WriterSlot::Set(std::shared_ptr<http::SseWriter> writer) {
  {
    absl::MutexLock lock(&mu_);
    if (writer_ != nullptr || abandoned_) return;
    writer_ = std::move(writer);
  }
  wake_->Notify();
}

void WriterSlot::Abandon() {
  {
    absl::MutexLock lock(&mu_);
    if (writer_ != nullptr || abandoned_) return;
    abandoned_ = true;
  }
  wake_->Notify();
}

bool WriterSlot::settled() {
  absl::MutexLock lock(&mu_);
  return writer_ != nullptr || abandoned_;
}

std::shared_ptr<http::SseWriter> WriterSlot::writer() {
  absl::MutexLock lock(&mu_);
  return writer_;
}

}  // namespace tandem::router
