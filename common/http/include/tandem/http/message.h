#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace tandem::http {

using Header = std::pair<std::string, std::string>;

struct Request {
  std::string method;  // As sent, e.g. "GET".
  std::string target;  // Path and query as sent, e.g. "/v1/models?x=1".
  std::string path;    // target before '?'.
  std::string query;   // target after '?', without it.
  std::vector<Header> headers;
  std::string body;
  std::string remote_address;  // Peer "ip:port", for logs; empty if the socket could not tell.

  // First header named `name` (case-insensitive).
  absl::optional<absl::string_view> FindHeader(absl::string_view name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  // Extra headers. Content-Length, Content-Type (use content_type), Transfer-Encoding and
  // Connection belong to the server and are dropped here, as are names or values with CR/LF.
  std::vector<Header> headers;
  std::string body;

  static Response Text(int status, std::string body);
  static Response Json(int status, std::string body);
};

}  // namespace tandem::http
