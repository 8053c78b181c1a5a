// The bytes of one client connection, read as the server's session reads them: Beast's request
// parser with the server's header and body limits, request after request (pipelining) until the
// bytes run out or one is malformed, each turned into a Request (exchange.cc), routed, answered,
// and framed back into a response. The handler echoes request headers into the response, so
// the header filtering of BuildResponse / FormatStreamHead sees client-controlled values.
#include <cstdint>
#include <sstream>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "exchange.h"
#include "fuzz_util.h"
#include "tandem/http/config.h"
#include "tandem/http/router.h"

namespace {

namespace bhttp = boost::beast::http;
using tandem::http::Header;
using tandem::http::HandlerResult;
using tandem::http::Request;
using tandem::http::Response;

tandem::http::Router* MakeRouter() {
  auto* router = new tandem::http::Router;
  auto echo = [](const Request& request) -> HandlerResult {
    Response response = Response::Text(200, request.body);
    for (const Header& header : request.headers) response.headers.push_back(header);
    response.headers.emplace_back("X-Query", request.query);
    if (auto value = request.FindHeader("x-status")) {
      // Handlers pick statuses; out-of-range ones must still frame as a valid response.
      response.status = static_cast<int>(value->size()) * 100 - 1;
    }
    return response;
  };
  (void)router->Handle("POST", "/v1/completions", echo);
  (void)router->Handle("GET", "/v1/models", echo);
  (void)router->Handle("GET", "/throws", [](const Request&) -> HandlerResult {
    throw std::runtime_error("handler failure");
  });
  return router;
}

void Answer(const tandem::http::Router& router, Request request, bool keep_alive) {
  HandlerResult result = tandem::http::internal::RunHandler(router, request);
  auto* response = std::get_if<Response>(&result);
  if (response == nullptr) return;
  const std::string head =
      tandem::http::internal::FormatStreamHead(response->status, response->headers, true,
                                               keep_alive);
  std::ostringstream wire;
  wire << tandem::http::internal::BuildResponse(std::move(*response), keep_alive);
  // A header value must never end the head early (response splitting).
  if (head.find("\r\n\r\n") != head.size() - 4) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const tandem::http::Router* router = MakeRouter();
  static const tandem::http::ServerConfig config;
  absl::string_view rest = tandem::fuzz::AsText(data, size);
  // Bounded like a connection's keep-alive run; more requests only repeat the same code.
  for (int i = 0; i < 16 && !rest.empty(); ++i) {
    bhttp::request_parser<bhttp::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(config.max_header_bytes));
    parser.body_limit(config.max_body_bytes);
    boost::beast::error_code ec;
    while (!parser.is_done()) {
      const std::size_t used = parser.put(boost::asio::buffer(rest.data(), rest.size()), ec);
      rest.remove_prefix(used);
      if (ec == bhttp::error::need_more) {
        if (!rest.empty() && used > 0) continue;
        // The client closed the connection: the session drops a partial request silently.
        parser.put_eof(ec);
        if (ec || !parser.is_done()) return 0;
        break;
      }
      if (ec) return 0;  // answered 400/413/431 and closed
      if (used == 0 && !parser.is_done()) return 0;
    }
    const bool keep_alive = parser.get().keep_alive();
    Answer(*router, tandem::http::internal::ToRequest(parser.release()), keep_alive);
    if (!keep_alive) return 0;
  }
  return 0;
}
