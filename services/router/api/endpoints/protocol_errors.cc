#include "api/endpoints/protocol_errors.h"

#include "absl/strings/str_cat.h"
#include "admission/admission.h"
#include "api/http/api_error.h"
#include "tandem/recipe/errors.h"

namespace tandem::router {

http::Response ProtocolErrorResponse(recipe::Protocol protocol, const absl::Status& status) {
  absl::Status described = status;
  if (!status.GetPayload(recipe::kErrorPayloadUrl).has_value()) {
    const ApiError error = ApiError::FromStatus(status);
    described = recipe::ConversionFailure(
        error.http_status, error.type, status.message(), std::nullopt,
        error.code.empty() ? std::nullopt : std::optional<std::string>(error.code));
  }
  const recipe::ErrorEnvelope envelope = recipe::ToErrorEnvelope(described, protocol);
  http::Response response = http::Response::Json(envelope.http_status, envelope.body);
  if (envelope.http_status == 429 || envelope.http_status == 503) {
    response.headers.emplace_back("Retry-After", absl::StrCat(RetryAfterSeconds(status)));
  }
  return response;
}

}  // namespace tandem::router
