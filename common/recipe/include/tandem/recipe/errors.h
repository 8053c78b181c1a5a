#pragma once

// Conversion failures and the error bodies they become.
//
// Converters report a rejected request as an absl::Status whose message is the client-facing
// message and whose payload kErrorPayloadUrl carries the HTTP status and the OpenAI-style error
// fields as compact JSON: {"status":400,"type":"invalid_request_error","param":null,
// "code":"invalid_request_error"}. Build them with RequestError / ConversionFailure; a status
// without the payload maps by its code (InvalidArgument 400, NotFound 404, ResourceExhausted 429,
// Unavailable 503, anything else 500).
//
//   absl::StatusOr<ConversationRequest> r = ConvertChatCompletions(body, options);
//   if (!r.ok()) { ErrorEnvelope e = ToErrorEnvelope(r.status(), Protocol::kChatCompletions); ... }

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tandem/recipe/conversation.h"

namespace tandem::recipe {

inline constexpr absl::string_view kErrorPayloadUrl = "type.tandem.dev/recipe.ConversionFailure";

// 400 invalid_request_error (type and code), param null: deepseek-recipe's usual rejection.
absl::Status RequestError(absl::string_view message);

// Any status and OpenAI error type; `code` defaults to the type, as deepseek-recipe writes it.
absl::Status ConversionFailure(int http_status, absl::string_view type, absl::string_view message,
                               std::optional<std::string> param = std::nullopt,
                               std::optional<std::string> code = std::nullopt);

struct ErrorEnvelope {
  int http_status = 500;
  std::string body;  // compact JSON
};

// The fields of a failure (from the payload, or derived from the status code).
struct ErrorFields {
  int http_status = 500;
  std::string type;
  std::string message;
  std::optional<std::string> param;
  std::optional<std::string> code;
};
ErrorFields ErrorFieldsOf(const absl::Status& status);

// The protocol's own envelope, what its official SDK parses: OpenAI
// {"error":{"message","type","param","code"}} for Chat Completions and Responses, Anthropic
// {"type":"error","error":{"type","message"}} for Messages.
ErrorEnvelope ToErrorEnvelope(const absl::Status& status, Protocol protocol);

// deepseek-recipe's ConversionError body, which is the OpenAI envelope for every protocol (the
// differential tests compare against it).
ErrorEnvelope ToRecipeErrorEnvelope(const absl::Status& status);

}  // namespace tandem::recipe
