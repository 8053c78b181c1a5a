#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace tandem::http {

// The "= {}" initializers let callers write designated initializers such as {.data = "x"}
// without -Wmissing-field-initializers noise.
struct SseEvent {
  std::string data = {};   // May span lines; each becomes its own "data:" line.
  std::string event = {};  // Optional "event:" name.
  std::string id = {};     // Optional "id:".
};

// The wire form of one event, ending with the blank line that dispatches it. CR and LF inside
// `event` and `id` are dropped so a value cannot inject extra fields.
std::string FormatSseEvent(const SseEvent& event);

// The producer side of one Server-Sent Events response. Every method is thread-safe, so the
// handler can hand the writer to whatever thread produces the events (e.g. a decode loop).
//
// Backpressure: at most ServerConfig::sse_queue_events events are buffered between the producer
// and the socket; a full buffer makes TryWrite fail fast and Write wait.
// Cancellation: when the client disconnects, a write to it fails or times out, or the server shuts
// down, the writer becomes cancelled: writes fail with kCancelled and OnCancel callbacks run.
class SseWriter {
 public:
  virtual ~SseWriter() = default;

  // Queues `event` without blocking. kResourceExhausted when the buffer is full, kCancelled once
  // cancelled, kFailedPrecondition after Close().
  virtual absl::Status TryWrite(const SseEvent& event) = 0;
  // As TryWrite, but waits up to `timeout` for room; kDeadlineExceeded if none came.
  virtual absl::Status Write(const SseEvent& event, absl::Duration timeout) = 0;
  // Ends the stream once the queued events are sent. Idempotent.
  virtual void Close() = 0;

  virtual bool cancelled() const = 0;
  // Runs `callback` once on cancellation, on an arbitrary thread (immediately, on the caller's
  // thread, if already cancelled). It must not block. Not run for a stream that ended by Close().
  virtual void OnCancel(std::function<void()> callback) = 0;
};

}  // namespace tandem::http
