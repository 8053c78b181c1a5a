#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tandem/http/config.h"
#include "tandem/http/router.h"

namespace tandem::http {

// An HTTP/1.1 server (keep-alive, chunked SSE streaming) on a pool of I/O threads.
//
//   Router router;
//   router.Handle("GET", "/health", [](const Request&) { return Response::Text(200, "ok"); });
//   auto server = Server::Start(config, std::move(router));   // listening on return
//   ... server.value()->port() ...
//   server.value()->Shutdown(absl::Seconds(5));
class Server {
 public:
  // Binds, listens and starts the I/O threads. Errors: InvalidArgument for a bad config,
  // Unavailable when the address cannot be resolved or bound.
  static absl::StatusOr<std::unique_ptr<Server>> Start(ServerConfig config, Router router);

  // Shuts down with a zero grace period if Shutdown was not called.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The bound port (the ephemeral one when the config asked for 0).
  uint16_t port() const;
  size_t active_connections() const;

  // Stops accepting, closes idle connections, lets in-flight requests and open streams finish
  // for up to `grace`, then cancels the remaining streams (their writers report cancelled),
  // closes every connection and joins the I/O threads. Idempotent; blocks until done, so it
  // must not be called from a handler or an OnCancel callback (they run on the I/O threads).
  void Shutdown(absl::Duration grace);

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::http
