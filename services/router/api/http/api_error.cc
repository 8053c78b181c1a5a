#include "api/http/api_error.h"

#include "absl/strings/str_cat.h"
#include "admission/admission.h"
#include "api/http/json_text.h"

namespace tandem::router {

ApiError ApiError::Invalid(std::string message, std::string param) {
  ApiError e;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

ApiError ApiError::FromStatus(const absl::Status& status) {
  ApiError e;
  e.message = std::string(status.message());
  e.retry_after_s = RetryAfterSeconds(status);
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      e.http_status = 400;
      break;
    case absl::StatusCode::kResourceExhausted:
      e.http_status = 429;
      e.type = "rate_limit_error";
      e.code = "overloaded";
      break;
    case absl::StatusCode::kUnavailable:
      e.http_status = 503;
      e.type = "service_unavailable";
      e.code = "worker_unavailable";
      break;
    case absl::StatusCode::kDeadlineExceeded:
      e.http_status = 504;
      e.type = "timeout_error";
      e.code = "request_timeout";
      break;
    case absl::StatusCode::kCancelled:
      e.http_status = 499;  // the client went away; nobody reads this
      e.type = "cancelled";
      break;
    default:
      e.http_status = 502;
      e.type = "server_error";
      e.code = "worker_error";
      break;
  }
  return e;
}

std::string ApiError::ToJson() const {
  nlohmann::json error = {{"message", message},
                          {"type", type},
                          {"param", param.empty() ? nlohmann::json() : nlohmann::json(param)},
                          {"code", code.empty() ? nlohmann::json() : nlohmann::json(code)}};
  return DumpJson(nlohmann::json{{"error", std::move(error)}});
}

http::Response ApiError::ToResponse() const {
  http::Response response = http::Response::Json(http_status, ToJson());
  if (http_status == 429 || http_status == 503) {
    response.headers.emplace_back("Retry-After", absl::StrCat(retry_after_s));
  }
  return response;
}

}  // namespace tandem::router
