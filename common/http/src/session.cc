#include "session.h"

#include <chrono>
#include <optional>
#include <string>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "deferred_exchange.h"
#include "exchange.h"
#include "linger.h"
#include "sse_stream.h"

namespace tandem::http::internal {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

constexpr std::chrono::milliseconds kLingerAfterError{2000};

std::chrono::steady_clock::duration ToChrono(absl::Duration d) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      absl::ToChronoNanoseconds(d));
}

class Session final : public Connection, public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<ServerContext> context, tcp::socket socket)
      : context_(std::move(context)),
        config_(context_->config),
        socket_(std::move(socket)),
        deadline_(socket_.get_executor()) {}

  ~Session() override {
    if (stream_) stream_->Cancel();
    CancelDeferred();
    context_->Unregister(id_);
  }

  void Start() {
    id_ = context_->Register(weak_from_this());
    net::post(socket_.get_executor(), [self = shared_from_this()] { self->ReadHeader(); });
  }

  void Drain() override {
    net::post(socket_.get_executor(), [self = shared_from_this()] {
      self->draining_ = true;
      if (self->phase_ == Phase::kIdle) self->CloseNow();
    });
  }

  void Abort() override {
    net::post(socket_.get_executor(), [self = shared_from_this()] {
      if (self->stream_) self->stream_->Cancel();
      self->CancelDeferred();
      self->CloseNow();
    });
  }

  void CancelStreamAfterStop() override {
    if (stream_) stream_->Cancel();
    CancelDeferred();
  }

 private:
  // kAwaitingWatch: a response is out, but the cancelled disconnect watch of its deferred answer
  // has not reported yet (see WriteResponse).
  enum class Phase {
    kIdle,
    kReading,
    kHandling,
    kDeferred,
    kWriting,
    kAwaitingWatch,
    kStreaming,
    kClosed
  };

  // ---- deadlines: one timer, re-armed per phase; expiry closes the socket ----

  void ArmDeadline(absl::Duration timeout) {
    const uint64_t generation = ++deadline_generation_;
    deadline_.expires_after(ToChrono(timeout));
    deadline_.async_wait([self = shared_from_this(), generation](error_code ec) {
      if (ec || generation != self->deadline_generation_) return;
      self->timed_out_ = true;
      if (self->stream_) self->stream_->Cancel();
      self->CloseNow();
    });
  }

  void DisarmDeadline() {
    ++deadline_generation_;
    deadline_.cancel();
  }

  // ---- reading a request ----

  void WaitForNextRequest() {
    phase_ = Phase::kIdle;
    if (draining_ || context_->draining) return CloseNow();
    if (buffer_.size() > 0) return ReadHeader();  // Pipelined bytes are already here.
    ArmDeadline(config_.idle_timeout);
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](error_code ec) {
      if (ec || self->phase_ != Phase::kIdle) return self->CloseNow();
      self->ReadHeader();
    });
  }

  void ReadHeader() {
    phase_ = Phase::kReading;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(config_.max_header_bytes));
    parser_->body_limit(config_.max_body_bytes);
    ArmDeadline(config_.header_timeout);
    bhttp::async_read_header(socket_, buffer_, *parser_,
                             [self = shared_from_this()](error_code ec, size_t) {
                               self->OnHeader(ec);
                             });
  }

  void OnHeader(error_code ec) {
    if (ec) return OnReadError(ec);
    const auto content_length = parser_->content_length();
    if (content_length && *content_length > config_.max_body_bytes) {
      return RespondError(413, "request body too large");
    }
    if (parser_->is_done()) return Dispatch();
    if (absl::EqualsIgnoreCase(ToAbsl(parser_->get()[bhttp::field::expect]), "100-continue")) {
      // Clients that ask first (curl does for large bodies) would otherwise stall a second.
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      return net::async_write(socket_, net::buffer(kContinue.data(), kContinue.size()),
                              [self = shared_from_this()](error_code ec, size_t) {
                                if (ec) return self->CloseNow();
                                self->ReadBody();
                              });
    }
    ReadBody();
  }

  void ReadBody() {
    ArmDeadline(config_.body_timeout);
    bhttp::async_read(socket_, buffer_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->OnReadError(ec);
      self->Dispatch();
    });
  }

  void OnReadError(error_code ec) {
    if (timed_out_ || phase_ == Phase::kClosed) return CloseNow();
    if (ec == bhttp::error::body_limit) return RespondError(413, "request body too large");
    if (ec == bhttp::error::header_limit) return RespondError(431, "request headers too large");
    if (ec == bhttp::error::end_of_stream || ec == net::error::eof ||
        ec == net::error::connection_reset || ec == net::error::operation_aborted ||
        ec == bhttp::error::partial_message) {
      return CloseNow();
    }
    RespondError(400, absl::StrCat("malformed request: ", ec.message()));
  }

  // ---- handling ----

  void Dispatch() {
    DisarmDeadline();
    phase_ = Phase::kHandling;
    bhttp::request<bhttp::string_body> message = parser_->release();
    parser_.reset();
    keep_alive_ = message.keep_alive();
    http11_ = message.version() >= 11;
    Request request = ToRequest(std::move(message));
    request.remote_address = RemoteAddress();
    HandlerResult result = RunHandler(context_->router, request);
    if (auto* sse = std::get_if<SseResponse>(&result)) return StartStream(std::move(*sse));
    if (auto* deferred = std::get_if<DeferredResponse>(&result)) {
      return StartDeferredResponse(std::move(*deferred));
    }
    WriteResponse(std::move(std::get<Response>(result)), /*close_after=*/false);
  }

  void RespondError(int status, std::string message) {
    keep_alive_ = false;
    WriteResponse(Response::Text(status, std::move(message)), /*close_after=*/true);
  }

  void WriteResponse(Response response, bool close_after) {
    phase_ = Phase::kWriting;
    const bool keep_alive = keep_alive_ && !close_after && !draining_ && !context_->draining;
    auto message = std::make_shared<bhttp::response<bhttp::string_body>>(
        BuildResponse(std::move(response), keep_alive));
    ArmDeadline(config_.write_timeout);
    bhttp::async_write(socket_, *message,
                       [self = shared_from_this(), message, keep_alive](error_code ec, size_t) {
                         self->DisarmDeadline();
                         if (ec || self->phase_ == Phase::kClosed) return self->CloseNow();
                         if (!keep_alive) return self->CloseAfterResponse();
                         // The cancelled disconnect watch of a deferred answer still owns a read
                         // into buffer_ until its handler runs, which with several I/O threads
                         // can come after this; the next request waits for it, or that late
                         // handler would find the next request pending and take the aborted read
                         // for the client leaving.
                         if (self->watching_) {
                           self->phase_ = Phase::kAwaitingWatch;
                           return;
                         }
                         self->WaitForNextRequest();
                       });
  }

  // ---- deferred responses ----

  void StartDeferredResponse(DeferredResponse deferred) {
    phase_ = Phase::kDeferred;
    auto deliver = [weak = weak_from_this(),
                    executor = socket_.get_executor()](DeferredExchange::Answer answer) {
      net::post(executor, [weak, answer = std::move(answer)]() mutable {
        if (auto self = weak.lock()) self->OnDeferredAnswer(std::move(answer));
      });
    };
    auto exchange = std::make_shared<DeferredExchange>(std::move(deliver));
    // Weak: the handler owns the exchange, so a handler that drops it gets the 500 fallback.
    deferred_ = exchange;
    WatchForDisconnect();
    if (!StartDeferred(deferred, exchange)) {
      exchange->Respond(Response::Text(500, "handler failed to start the response"));
    }
  }

  void OnDeferredAnswer(DeferredExchange::Answer answer) {
    if (phase_ != Phase::kDeferred) return;
    deferred_.reset();
    // The disconnect watch keeps running for a stream; a plain response stops it, and its handler
    // then sees kWriting and leaves the socket alone.
    if (auto* stream = std::get_if<SseResponse>(&answer)) return StartStream(std::move(*stream));
    phase_ = Phase::kWriting;
    error_code ignored;
    socket_.cancel(ignored);
    WriteResponse(std::move(std::get<Response>(answer)), /*close_after=*/false);
  }

  void CancelDeferred() {
    if (auto exchange = deferred_.lock()) exchange->Cancel();
    deferred_.reset();
  }

  // ---- streaming ----

  void StartStream(SseResponse sse) {
    phase_ = Phase::kStreaming;
    final_chunk_queued_ = false;
    stream_done_ = false;
    auto wake = [weak = weak_from_this(), executor = socket_.get_executor()] {
      net::post(executor, [weak] {
        if (auto self = weak.lock()) self->PumpStream();
      });
    };
    stream_ = std::make_shared<SseStream>(config_.sse_queue_events, std::move(wake));
    // HTTP/1.0 has no chunked encoding: the body then runs until the connection closes.
    stream_chunked_ = http11_;
    const bool keep_alive = keep_alive_ && stream_chunked_ && !draining_ && !context_->draining;
    stream_keep_alive_ = keep_alive;
    WriteStreamBytes(FormatStreamHead(sse.status, sse.headers, stream_chunked_, keep_alive));
    if (!watching_) WatchForDisconnect();  // a deferred stream is watched already
    if (!OpenStream(sse, stream_)) {
      stream_->Cancel();
      CloseNow();
    }
  }

  // While streaming (or waiting for a deferred answer) the client has nothing to say; a read
  // completing means it left (or, rarely, pipelined its next request, which is kept for later).
  void WatchForDisconnect() {
    watching_ = true;
    socket_.async_read_some(
        buffer_.prepare(4096), [self = shared_from_this()](error_code ec, size_t bytes) {
          self->watching_ = false;
          if (!ec) self->buffer_.commit(bytes);
          if (self->phase_ == Phase::kClosed) return;
          if (self->phase_ == Phase::kAwaitingWatch) return self->WaitForNextRequest();
          const bool gone = ec || self->buffer_.size() > self->config_.max_header_bytes;
          if (self->phase_ == Phase::kDeferred) {
            if (!gone) return self->WatchForDisconnect();
            self->CancelDeferred();
            return self->CloseNow();
          }
          // A deferred plain response is being written; that path owns the socket.
          if (self->phase_ != Phase::kStreaming) return;
          if (self->stream_done_) return self->WaitForNextRequest();
          if (gone) {
            self->stream_->Cancel();
            return self->CloseNow();
          }
          self->WatchForDisconnect();
        });
  }

  void PumpStream() {
    if (phase_ != Phase::kStreaming || stream_writing_ || stream_done_) return;
    SseStream::Batch batch = stream_->Take();
    std::string bytes;
    if (!stream_chunked_) {
      bytes = std::move(batch.bytes);
    } else if (!batch.bytes.empty()) {
      absl::StrAppend(&bytes, absl::Hex(batch.bytes.size()), "\r\n", batch.bytes, "\r\n");
    }
    if (batch.end_of_stream) {
      if (stream_chunked_) bytes += "0\r\n\r\n";
      final_chunk_queued_ = true;
    }
    if (!bytes.empty() || final_chunk_queued_) WriteStreamBytes(std::move(bytes));
  }

  void WriteStreamBytes(std::string bytes) {
    stream_writing_ = true;
    write_buffer_ = std::move(bytes);
    ArmDeadline(config_.write_timeout);
    net::async_write(socket_, net::buffer(write_buffer_),
                     [self = shared_from_this()](error_code ec, size_t) {
                       self->OnStreamBytesWritten(ec);
                     });
  }

  void OnStreamBytesWritten(error_code ec) {
    stream_writing_ = false;
    DisarmDeadline();
    stream_->Flushed();
    if (phase_ == Phase::kClosed) return;
    if (ec) {
      stream_->Cancel();
      return CloseNow();
    }
    if (!final_chunk_queued_) return PumpStream();
    stream_->MarkFinished();
    stream_->Cancel();  // Finished, so this only detaches the producer side from this session.
    stream_done_ = true;
    if (!stream_keep_alive_ || draining_ || context_->draining) return CloseNow();
    // Stop the disconnect watch; its handler moves on to the next request.
    error_code ignored;
    socket_.cancel(ignored);
  }

  // ---- closing ----

  void CloseAfterResponse() {
    phase_ = Phase::kClosed;
    DisarmDeadline();
    LingerAndClose(std::move(socket_), kLingerAfterError);
  }

  void CloseNow() {
    if (phase_ == Phase::kClosed) return;
    phase_ = Phase::kClosed;
    DisarmDeadline();
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  std::string RemoteAddress() const {
    error_code ec;
    const tcp::endpoint peer = socket_.remote_endpoint(ec);
    if (ec) return "";
    return absl::StrCat(peer.address().to_string(), ":", peer.port());
  }

  static absl::string_view ToAbsl(std::string_view text) { return {text.data(), text.size()}; }

  const std::shared_ptr<ServerContext> context_;
  const ServerConfig& config_;
  tcp::socket socket_;
  net::steady_timer deadline_;
  uint64_t deadline_generation_ = 0;
  uint64_t id_ = 0;
  bool timed_out_ = false;
  bool draining_ = false;
  bool keep_alive_ = false;
  bool http11_ = true;
  Phase phase_ = Phase::kReading;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;

  std::weak_ptr<DeferredExchange> deferred_;
  std::shared_ptr<SseStream> stream_;
  std::string write_buffer_;
  bool stream_keep_alive_ = false;
  bool stream_chunked_ = true;
  bool stream_writing_ = false;
  bool final_chunk_queued_ = false;
  bool stream_done_ = false;
  bool watching_ = false;  // a disconnect watch (read) is pending
};

}  // namespace

void StartSession(std::shared_ptr<ServerContext> context, tcp::socket socket) {
  // A stream's head goes out when its first event is ready (a refusal must come before any
  // byte), so the head and the first event are two small writes back to back: with Nagle's
  // algorithm the event waits for the head's ACK, which a client in delayed-ACK mode (any
  // reused connection) holds up to 40 ms. Every SSE event is latency-bound, never coalesced.
  error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  std::make_shared<Session>(std::move(context), std::move(socket))->Start();
}

}  // namespace tandem::http::internal
