#include "exchange.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tandem::http::internal {
namespace {

namespace bhttp = boost::beast::http;

bool IsValidStatus(int status) { return status >= 100 && status <= 599; }

// Headers whose values the server decides; a handler setting them would corrupt framing.
bool IsServerOwned(absl::string_view name) {
  for (absl::string_view owned :
       {"content-length", "transfer-encoding", "connection", "content-type"}) {
    if (absl::EqualsIgnoreCase(name, owned)) return true;
  }
  return false;
}

bool IsSafeHeader(const Header& header) {
  auto has_break = [](absl::string_view s) {
    return s.find_first_of("\r\n") != absl::string_view::npos;
  };
  return !header.first.empty() && !has_break(header.first) && !has_break(header.second) &&
         header.first.find(':') == std::string::npos && !IsServerOwned(header.first);
}

std::string ToString(std::string_view text) { return std::string(text.data(), text.size()); }

}  // namespace

Request ToRequest(bhttp::request<bhttp::string_body> message) {
  Request request;
  request.method = ToString(message.method_string());
  request.target = ToString(message.target());
  const size_t query = request.target.find('?');
  request.path = request.target.substr(0, query);
  if (query != std::string::npos) request.query = request.target.substr(query + 1);
  for (const auto& field : message) {
    request.headers.emplace_back(ToString(field.name_string()), ToString(field.value()));
  }
  request.body = std::move(message.body());
  return request;
}

HandlerResult RunHandler(const Router& router, const Request& request) {
  Router::Match match = router.Find(request.method, request.path);
  if (match.handler == nullptr) {
    if (match.allowed_methods.empty()) {
      return Response::Text(404, absl::StrCat("no route for ", request.path));
    }
    Response response = Response::Text(
        405, absl::StrCat(request.method, " not allowed for ", request.path));
    response.headers.emplace_back("Allow", match.allowed_methods);
    return response;
  }
  try {
    return (*match.handler)(request);
  } catch (const std::exception& e) {
    return Response::Text(500, absl::StrCat("handler failed: ", e.what()));
  } catch (...) {
    return Response::Text(500, "handler failed");
  }
}

bhttp::response<bhttp::string_body> BuildResponse(Response response, bool keep_alive) {
  if (!IsValidStatus(response.status)) {
    response = Response::Text(500, absl::StrCat("handler returned invalid HTTP status ",
                                                 response.status));
  }
  bhttp::response<bhttp::string_body> message{static_cast<bhttp::status>(response.status), 11};
  message.set(bhttp::field::server, "tandem");
  message.set(bhttp::field::content_type, response.content_type);
  for (const Header& header : response.headers) {
    if (IsSafeHeader(header)) message.insert(header.first, header.second);
  }
  message.body() = std::move(response.body);
  message.keep_alive(keep_alive);
  message.prepare_payload();
  return message;
}

std::string FormatStreamHead(int status, const std::vector<Header>& headers, bool chunked,
                             bool keep_alive) {
  if (!IsValidStatus(status)) status = 500;
  std::string head = absl::StrCat(
      "HTTP/1.1 ", status, " ", ToString(bhttp::obsolete_reason(static_cast<bhttp::status>(status))),
      "\r\nServer: tandem\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n",
      chunked ? "Transfer-Encoding: chunked\r\n" : "", "Connection: ",
      keep_alive ? "keep-alive" : "close", "\r\n");
  for (const Header& header : headers) {
    if (IsSafeHeader(header)) absl::StrAppend(&head, header.first, ": ", header.second, "\r\n");
  }
  head += "\r\n";
  return head;
}

bool OpenStream(const SseResponse& sse, std::shared_ptr<SseWriter> writer) {
  if (!sse.on_open) return false;
  try {
    sse.on_open(std::move(writer));
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace tandem::http::internal
