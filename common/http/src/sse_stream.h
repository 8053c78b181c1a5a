#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "tandem/http/sse_writer.h"

namespace tandem::http::internal {

// The SseWriter handed to handlers, and the queue the connection drains. Producers call the
// SseWriter methods from any thread; the connection calls the "I/O side" methods from its strand.
class SseStream final : public SseWriter {
 public:
  // `wake` asks the connection to drain the queue; it must not block or run the drain inline.
  // It is called with the stream's lock held, so Detach() fences it off.
  SseStream(size_t capacity, std::function<void()> wake);

  absl::Status TryWrite(const SseEvent& event) override;
  absl::Status Write(const SseEvent& event, absl::Duration timeout) override;
  void Close() override;
  bool cancelled() const override { return cancelled_.load(std::memory_order_acquire); }
  void OnCancel(std::function<void()> callback) override;

  // ---- I/O side ----
  struct Batch {
    std::string bytes;          // Every queued event, concatenated.
    bool end_of_stream = false;  // Close() was called and `bytes` holds the last of it.
  };
  // Moves the queued events out; they keep occupying capacity until Flushed().
  Batch Take();
  void Flushed();
  // The terminal chunk went out: later Cancel() calls no longer run callbacks.
  void MarkFinished();
  // Fails pending and future writes, runs the callbacks (unless finished) and detaches `wake`.
  // Idempotent; safe from any thread.
  void Cancel();

 private:
  absl::Status EnqueueLocked(std::string frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RejectionLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HasRoomLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t capacity_;
  std::atomic<bool> cancelled_{false};
  mutable absl::Mutex mu_;
  std::function<void()> wake_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  size_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::function<void()>> on_cancel_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::http::internal
