#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "async/executor.h"
#include "async/task.h"
#include "dispatch/call_canceller.h"
#include "router_metrics.h"
#include "tandem/http/message.h"
#include "tandem/http/router.h"
#include "tandem/http/sse_writer.h"

namespace tandem::router {

class WriterSlot;

// The client side of one generation: a whole response, or a server-sent event stream that opens
// lazily (so a failure before the first output still gets its own HTTP status). Nothing here
// blocks: events are queued and Flush() awaits their way out, so a slow client holds back its
// own generation only. A client that disconnects, or stops reading for longer than the write
// timeout, cancels the generation through `canceller`. Used by one coroutine at a time.
class ClientChannel {
 public:
  ClientChannel(std::shared_ptr<http::Responder> responder,
                std::shared_ptr<CallCanceller> canceller, const RouterMetrics* metrics,
                std::string endpoint, absl::Duration write_timeout, async::Executor* executor);
  ~ClientChannel();
  ClientChannel(const ClientChannel&) = delete;
  ClientChannel& operator=(const ClientChannel&) = delete;

  // Headers every answer carries (the rate-limit headers), set before it is sent.
  void AddHeaders(std::vector<http::Header> headers);
  // Non-streaming answer (or the error answer of a stream that never opened).
  void Answer(http::Response response);

  // Starts the stream once (200 and the event-stream head); false when it already failed.
  bool OpenStream();
  // OpenStream was called: from now on the answer is the stream.
  bool stream_open() const { return slot_ != nullptr; }
  // The stream was to open but the client had left: nothing more can be answered.
  bool open_failed() const { return open_failed_; }
  bool client_gone() const { return gone_; }
  // Queues one event of the opened stream; dropped once the client is gone.
  void Write(http::SseEvent event);
  // Completes when the stream is open and every queued event was handed to the connection; false
  // (and the generation cancelled) when the client left or did not read for the write timeout.
  async::Task<bool> Flush();
  // Ends the stream after what was flushed.
  void CloseStream();

 private:
  std::function<void()> CancelOnDisconnect() const;
  void Gone(const std::string& why);

  std::shared_ptr<http::Responder> responder_;
  std::shared_ptr<CallCanceller> canceller_;
  const RouterMetrics* metrics_;
  const std::string endpoint_;
  const absl::Duration write_timeout_;
  async::Executor* const executor_;
  std::shared_ptr<async::Event> opened_;
  std::shared_ptr<WriterSlot> slot_;
  std::shared_ptr<http::SseWriter> writer_;
  std::deque<http::SseEvent> pending_;
  std::vector<http::Header> extra_headers_;
  bool open_failed_ = false;
  bool gone_ = false;
};

}  // namespace tandem::router
