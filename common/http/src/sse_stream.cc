#include "sse_stream.h"

namespace tandem::http::internal {

SseStream::SseStream(size_t capacity, std::function<void()> wake)
    : capacity_(capacity), wake_(std::move(wake)) {}

absl::Status SseStream::RejectionLocked() const {
  if (cancelled()) {
    return absl::CancelledError("SSE stream cancelled: client gone or server shutting down");
  }
  if (closed_) return absl::FailedPreconditionError("SSE stream already closed");
  return absl::OkStatus();
}

bool SseStream::HasRoomLocked() const { return queue_.size() + in_flight_ < capacity_; }

absl::Status SseStream::EnqueueLocked(std::string frame) {
  const bool was_empty = queue_.empty();
  queue_.push_back(std::move(frame));
  // A non-empty queue already has a drain pending or running, which will pick this up.
  if (was_empty && wake_) wake_();
  return absl::OkStatus();
}

absl::Status SseStream::TryWrite(const SseEvent& event) {
  std::string frame = FormatSseEvent(event);
  absl::MutexLock lock(&mu_);
  if (absl::Status status = RejectionLocked(); !status.ok()) return status;
  if (!HasRoomLocked()) {
    return absl::ResourceExhaustedError("SSE stream buffer full: the client reads slower");
  }
  return EnqueueLocked(std::move(frame));
}

absl::Status SseStream::Write(const SseEvent& event, absl::Duration timeout) {
  std::string frame = FormatSseEvent(event);
  absl::MutexLock lock(&mu_);
  auto can_proceed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return cancelled() || closed_ || HasRoomLocked();
  };
  mu_.AwaitWithTimeout(absl::Condition(&can_proceed), timeout);
  if (absl::Status status = RejectionLocked(); !status.ok()) return status;
  if (!HasRoomLocked()) {
    return absl::DeadlineExceededError("SSE stream buffer stayed full: the client reads slower");
  }
  return EnqueueLocked(std::move(frame));
}

void SseStream::Close() {
  absl::MutexLock lock(&mu_);
  if (closed_ || cancelled()) return;
  closed_ = true;
  if (queue_.empty() && wake_) wake_();
}

void SseStream::OnCancel(std::function<void()> callback) {
  {
    absl::MutexLock lock(&mu_);
    if (!cancelled()) {
      on_cancel_.push_back(std::move(callback));
      return;
    }
    if (finished_) return;
  }
  callback();
}

SseStream::Batch SseStream::Take() {
  absl::MutexLock lock(&mu_);
  Batch batch;
  for (std::string& frame : queue_) batch.bytes += frame;
  in_flight_ += queue_.size();
  queue_.clear();
  batch.end_of_stream = closed_ && !cancelled();
  return batch;
}

void SseStream::Flushed() {
  absl::MutexLock lock(&mu_);
  in_flight_ = 0;  // Writers blocked in Write() re-check their condition on unlock.
}

void SseStream::MarkFinished() {
  absl::MutexLock lock(&mu_);
  finished_ = true;
}

void SseStream::Cancel() {
  std::vector<std::function<void()>> callbacks;
  {
    absl::MutexLock lock(&mu_);
    wake_ = nullptr;
    if (cancelled() || finished_) return;
    cancelled_.store(true, std::memory_order_release);
    queue_.clear();
    callbacks.swap(on_cancel_);
  }
  for (auto& callback : callbacks) callback();
}

}  // namespace tandem::http::internal
