#pragma once

#include "absl/status/status.h"
#include "tandem/http/message.h"
#include "tandem/recipe/conversation.h"

namespace tandem::router {

// The HTTP answer to a failed protocol request in that protocol's own envelope (OpenAI for Chat
// Completions and Responses, Anthropic for Messages). Conversion failures carry their status and
// fields (recipe/errors.h); worker and dispatch failures keep the router's mapping (429 and 503
// with Retry-After, 504 past the deadline, 502 for a failing worker).
http::Response ProtocolErrorResponse(recipe::Protocol protocol, const absl::Status& status);

}  // namespace tandem::router
