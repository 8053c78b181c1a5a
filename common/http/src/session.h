#pragma once

#include <memory>

#include <boost/asio/ip/tcp.hpp>

#include "server_context.h"

namespace tandem::http::internal {

// Serves one accepted connection until it closes; the session owns itself through its pending
// operations and registers with `context` for shutdown. `socket` must run on a strand.
void StartSession(std::shared_ptr<ServerContext> context, boost::asio::ip::tcp::socket socket);

}  // namespace tandem::http::internal
