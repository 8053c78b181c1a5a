#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "call_canceller.h"
#include "router_metrics.h"
#include "tandem/http/message.h"
#include "tandem/http/router.h"
#include "tandem/http/sse_writer.h"

namespace tandem::router {

// The client side of one generation: a whole response, or a server-sent event stream that opens
// lazily (so a failure before the first output still gets its own HTTP status). A client that
// disconnects or stops reading cancels the generation through `canceller`.
class ClientChannel {
 public:
  ClientChannel(std::shared_ptr<http::Responder> responder,
                std::shared_ptr<CallCanceller> canceller, const RouterMetrics* metrics,
                std::string endpoint, absl::Duration write_timeout);
  ~ClientChannel();
  ClientChannel(const ClientChannel&) = delete;
  ClientChannel& operator=(const ClientChannel&) = delete;

  // Non-streaming answer (or the error answer of a stream that never opened).
  void Answer(http::Response response);

  // Opens the stream once; false when the client left before it opened.
  bool OpenStream();
  bool stream_open() const { return writer_ != nullptr; }
  // The stream was to open but the client had left: nothing more can be answered.
  bool open_failed() const { return open_failed_; }
  // False (and the generation cancelled) when the client is gone or too slow.
  bool Write(const http::SseEvent& event);
  bool client_gone() const { return writer_ != nullptr && writer_->cancelled(); }
  void CloseStream();

 private:
  std::function<void()> CancelOnDisconnect() const;

  std::shared_ptr<http::Responder> responder_;
  std::shared_ptr<CallCanceller> canceller_;
  const RouterMetrics* metrics_;
  const std::string endpoint_;
  const absl::Duration write_timeout_;
  std::shared_ptr<http::SseWriter> writer_;
  bool open_failed_ = false;
};

}  // namespace tandem::router
