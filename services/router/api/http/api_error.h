#pragma once

#include <string>

#include "absl/status/status.h"
#include "tandem/http/message.h"

namespace tandem::router {

// An OpenAI-style error: {"error":{"message","type","param","code"}} with an HTTP status.
struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;       // the offending request field; empty: null
  std::string code;        // machine-readable; empty: null
  long retry_after_s = 1;  // Retry-After of a 429 or 503

  static ApiError Invalid(std::string message, std::string param = "");
  // The client-facing form of a generation failure (worker status, deadline, overload).
  static ApiError FromStatus(const absl::Status& status);

  std::string ToJson() const;
  http::Response ToResponse() const;  // adds Retry-After to 429 and 503
};

}  // namespace tandem::router
