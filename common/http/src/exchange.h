#pragma once

#include <memory>
#include <string>
#include <vector>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "tandem/http/router.h"
#include "tandem/http/sse_writer.h"

// Turning Beast messages into ours and back, and calling handlers at the exception boundary.
namespace tandem::http::internal {

Request ToRequest(boost::beast::http::request<boost::beast::http::string_body> message);

// Routes `request` and runs its handler: 404 / 405 (with Allow) when there is no route, 500 when
// the handler throws.
HandlerResult RunHandler(const Router& router, const Request& request);

// Invalid statuses become 500; headers the server owns (framing, Connection) or that carry line
// breaks are dropped.
boost::beast::http::response<boost::beast::http::string_body> BuildResponse(Response response,
                                                                             bool keep_alive);

// Status line and headers of a text/event-stream response; without `chunked` (HTTP/1.0) the
// body is delimited by closing the connection.
std::string FormatStreamHead(int status, const std::vector<Header>& headers, bool chunked,
                             bool keep_alive);

// Calls the handler's on_open; false when it is missing or throws.
bool OpenStream(const SseResponse& sse, std::shared_ptr<SseWriter> writer);

}  // namespace tandem::http::internal
