#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace tandem::http {

// Limits and sizing of one Server. Defaults suit a public-facing router.
struct ServerConfig {
  // A literal address or a resolvable name; the first resolved address is bound.
  std::string host = "127.0.0.1";
  // 0 asks the OS for a free port; Server::port() tells which.
  uint16_t port = 0;
  int io_threads = 2;

  // A larger declared or received body is answered 413 and the connection closed.
  size_t max_body_bytes = 8 << 20;
  // Request line plus headers; larger is answered 431.
  size_t max_header_bytes = 16 << 10;
  // From connection (or first byte of a keep-alive request) to the end of the headers. A slow
  // client (slow-loris) is disconnected without a response when it runs out.
  absl::Duration header_timeout = absl::Seconds(10);
  // For the whole body once the headers are in.
  absl::Duration body_timeout = absl::Seconds(30);
  // How long a keep-alive connection may sit between requests.
  absl::Duration idle_timeout = absl::Seconds(60);
  // For writing one response, or one chunk of a stream: a client that stops reading is dropped.
  absl::Duration write_timeout = absl::Seconds(30);
  // Connections beyond this are answered 503 and closed.
  size_t max_connections = 1024;
  // Events an SseWriter buffers (queued plus being written) before it pushes back.
  size_t sse_queue_events = 256;

  absl::Status Validate() const;
};

}  // namespace tandem::http
