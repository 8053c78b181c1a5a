#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tandem/http/message.h"
#include "tandem/http/sse_writer.h"

namespace tandem::http {

// A handler's answer when it streams: the server sends the head (chunked, text/event-stream)
// and calls `on_open` with the writer; `on_open` typically hands it to a producer thread.
struct SseResponse {
  int status = 200;
  std::vector<Header> headers;
  std::function<void(std::shared_ptr<SseWriter>)> on_open;
};

// Completes a DeferredResponse from any thread.
class Responder {
 public:
  virtual ~Responder() = default;
  // Sends `response`. Only the first Respond or RespondStream counts; calls after cancellation
  // are ignored.
  virtual void Respond(Response response) = 0;
  // Answers with a stream instead, e.g. once an LLM's first token exists, so that failures before
  // it can still be told with a proper status.
  virtual void RespondStream(SseResponse stream) = 0;
  // True once the client disconnected or the server shut down before Respond.
  virtual bool cancelled() const = 0;
  // Runs `callback` once on cancellation, on an arbitrary thread (immediately, on the caller's
  // thread, if already cancelled). It must not block. Not run once Respond was called.
  virtual void OnCancel(std::function<void()> callback) = 0;
};

// A handler's answer when computing the response takes long (a whole LLM generation): the server
// calls `start` with a Responder and waits for it without holding an I/O thread. A Responder
// released without responding answers 500.
struct DeferredResponse {
  std::function<void(std::shared_ptr<Responder>)> start;
};

using HandlerResult = std::variant<Response, SseResponse, DeferredResponse>;

// Runs on an I/O thread, possibly on several at once for different connections: it must be
// thread-safe, answer quickly and hand long work elsewhere. An exception escaping it is
// answered 500.
using Handler = std::function<HandlerResult(const Request&)>;

// Exact (method, path) dispatch. Immutable once given to a Server, so lookups take no lock.
class Router {
 public:
  // InvalidArgument for a method that is not an HTTP token or a path not starting with '/';
  // AlreadyExists for a duplicate route.
  absl::Status Handle(absl::string_view method, absl::string_view path, Handler handler);

  struct Match {
    const Handler* handler = nullptr;  // Null when there is no route for the request.
    // When handler is null: the methods the path does accept ("GET, POST"), empty for an
    // unknown path. Non-empty means 405, empty means 404.
    std::string allowed_methods;
  };
  Match Find(absl::string_view method, absl::string_view path) const;

 private:
  // path -> method -> handler; methods ordered so Allow is deterministic.
  absl::flat_hash_map<std::string, std::map<std::string, Handler>> routes_;
};

}  // namespace tandem::http
