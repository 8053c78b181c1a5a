#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "tandem/http/sse_writer.h"

namespace tandem::http::testing {

// An in-memory SseWriter for unit-testing handlers and producers without a server: it records
// events, and lets a test play the slow client (capacity) or the departing one (Disconnect).
class FakeSseWriter final : public SseWriter {
 public:
  explicit FakeSseWriter(size_t capacity = std::numeric_limits<size_t>::max())
      : capacity_(capacity) {}

  absl::Status TryWrite(const SseEvent& event) override {
    absl::MutexLock lock(&mu_);
    if (cancelled_) return absl::CancelledError("fake SSE client disconnected");
    if (closed_) return absl::FailedPreconditionError("fake SSE stream closed");
    if (pending_.size() >= capacity_) return absl::ResourceExhaustedError("fake SSE buffer full");
    pending_.push_back(event);
    events_.push_back(event);
    return absl::OkStatus();
  }

  // Never waits: a full buffer is reported as the deadline passing.
  absl::Status Write(const SseEvent& event, absl::Duration) override {
    absl::Status status = TryWrite(event);
    if (absl::IsResourceExhausted(status)) {
      return absl::DeadlineExceededError("fake SSE buffer full");
    }
    return status;
  }

  void Close() override {
    absl::MutexLock lock(&mu_);
    if (!cancelled_) closed_ = true;
  }

  bool cancelled() const override {
    absl::MutexLock lock(&mu_);
    return cancelled_;
  }

  void OnCancel(std::function<void()> callback) override {
    {
      absl::MutexLock lock(&mu_);
      if (!cancelled_) {
        callbacks_.push_back(std::move(callback));
        return;
      }
    }
    callback();
  }

  // ---- test controls ----

  // The client goes away: writes fail from now on and OnCancel callbacks run here.
  void Disconnect() {
    std::vector<std::function<void()>> callbacks;
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_ || closed_) return;
      cancelled_ = true;
      callbacks.swap(callbacks_);
    }
    for (auto& callback : callbacks) callback();
  }
  // The client catches up: buffered events stop counting against the capacity.
  void Deliver() {
    absl::MutexLock lock(&mu_);
    pending_.clear();
  }
  // Every event accepted so far, in order.
  std::vector<SseEvent> events() const {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  bool closed() const {
    absl::MutexLock lock(&mu_);
    return closed_;
  }

 private:
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::vector<SseEvent> events_ ABSL_GUARDED_BY(mu_);
  std::vector<SseEvent> pending_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> callbacks_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tandem::http::testing
