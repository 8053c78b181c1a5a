#pragma once

#include <chrono>

#include <boost/asio/ip/tcp.hpp>

namespace tandem::http::internal {

// Closes `socket` after a response without losing that response: closing with unread request
// bytes makes the kernel send RST, which can discard the response before the client reads it.
// So: shut down our sending side, discard what the client still sends until it closes or
// `max_wait` passes, then close. Runs on the socket's executor; owns itself.
void LingerAndClose(boost::asio::ip::tcp::socket socket, std::chrono::milliseconds max_wait);

// Answers a connection over the limit with a fixed 503 and closes it the same way.
void RejectOverloaded(boost::asio::ip::tcp::socket socket);

}  // namespace tandem::http::internal
