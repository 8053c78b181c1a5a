#include "tandem/recipe/errors.h"

#include "absl/strings/cord.h"
#include "absl/types/optional.h"
#include "nlohmann/json.hpp"

namespace tandem::recipe {
namespace {

absl::StatusCode CodeForHttp(int http_status) {
  switch (http_status) {
    case 400: case 422: return absl::StatusCode::kInvalidArgument;
    case 401: return absl::StatusCode::kUnauthenticated;
    case 403: return absl::StatusCode::kPermissionDenied;
    case 404: return absl::StatusCode::kNotFound;
    case 429: return absl::StatusCode::kResourceExhausted;
    case 503: return absl::StatusCode::kUnavailable;
    default: return absl::StatusCode::kInternal;
  }
}

int HttpForCode(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition: return 400;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kPermissionDenied: return 403;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kResourceExhausted: return 429;
    case absl::StatusCode::kUnavailable: return 503;
    default: return 500;
  }
}

std::string OpenAiTypeFor(int http_status) {
  switch (http_status) {
    case 400: case 404: case 422: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable_error";
    default: return "server_error";
  }
}

std::string AnthropicTypeFor(const ErrorFields& f) {
  switch (f.http_status) {
    case 400: case 422: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: case 529: return "overloaded_error";
    default: return "api_error";
  }
}

nlohmann::ordered_json OptionalString(const std::optional<std::string>& s) {
  return s.has_value() ? nlohmann::ordered_json(*s) : nlohmann::ordered_json(nullptr);
}

}  // namespace

absl::Status RequestError(absl::string_view message) {
  return ConversionFailure(400, "invalid_request_error", message);
}

absl::Status ConversionFailure(int http_status, absl::string_view type, absl::string_view message,
                               std::optional<std::string> param, std::optional<std::string> code) {
  absl::Status status(CodeForHttp(http_status), message);
  nlohmann::ordered_json payload = nlohmann::ordered_json::object();
  payload["status"] = http_status;
  payload["type"] = std::string(type);
  payload["param"] = OptionalString(param);
  payload["code"] = code.has_value() ? nlohmann::ordered_json(*code)
                                     : nlohmann::ordered_json(std::string(type));
  status.SetPayload(kErrorPayloadUrl, absl::Cord(payload.dump()));
  return status;
}

ErrorFields ErrorFieldsOf(const absl::Status& status) {
  ErrorFields f;
  f.message = std::string(status.message());
  const absl::optional<absl::Cord> payload = status.GetPayload(kErrorPayloadUrl);
  if (payload.has_value()) {
    const auto json = nlohmann::json::parse(std::string(*payload), nullptr, false);
    if (json.is_object()) {
      f.http_status = json.value("status", 500);
      f.type = json.value("type", std::string());
      if (json.contains("param") && json["param"].is_string()) f.param = json["param"];
      if (json.contains("code") && json["code"].is_string()) f.code = json["code"];
      if (!f.type.empty()) return f;
    }
  }
  f.http_status = HttpForCode(status.code());
  f.type = OpenAiTypeFor(f.http_status);
  f.code = f.type;
  return f;
}

ErrorEnvelope ToRecipeErrorEnvelope(const absl::Status& status) {
  const ErrorFields f = ErrorFieldsOf(status);
  nlohmann::ordered_json error = nlohmann::ordered_json::object();
  error["message"] = f.message;
  error["type"] = f.type;
  error["param"] = OptionalString(f.param);
  error["code"] = OptionalString(f.code);
  nlohmann::ordered_json body = nlohmann::ordered_json::object();
  body["error"] = std::move(error);
  return {f.http_status, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
}

ErrorEnvelope ToErrorEnvelope(const absl::Status& status, Protocol protocol) {
  if (protocol != Protocol::kMessages) return ToRecipeErrorEnvelope(status);
  const ErrorFields f = ErrorFieldsOf(status);
  nlohmann::ordered_json error = nlohmann::ordered_json::object();
  error["type"] = AnthropicTypeFor(f);
  error["message"] = f.message;
  nlohmann::ordered_json body = nlohmann::ordered_json::object();
  body["type"] = "error";
  body["error"] = std::move(error);
  return {f.http_status, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
}

}  // namespace tandem::recipe
