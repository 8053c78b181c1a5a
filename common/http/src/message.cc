#include "tandem/http/message.h"

#include "absl/strings/match.h"

namespace tandem::http {

absl::optional<absl::string_view> Request::FindHeader(absl::string_view name) const {
  for (const Header& header : headers) {
    if (absl::EqualsIgnoreCase(header.first, name)) return absl::string_view(header.second);
  }
  return absl::nullopt;
}

Response Response::Text(int status, std::string body) {
  Response response;
  response.status = status;
  response.body = std::move(body);
  return response;
}

Response Response::Json(int status, std::string body) {
  Response response = Text(status, std::move(body));
  response.content_type = "application/json";
  return response;
}

}  // namespace tandem::http
