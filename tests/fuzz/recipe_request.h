#pragma once

// What the router does with a protocol request body before anything runs (ProtocolApi::ParseBody
// and Prepare): JSON parsing without exceptions, conversion, rendering for both model versions,
// encoding, the max_tokens resolution, and the error envelope of a rejection.

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tandem/recipe/conversation.h"

namespace tandem::fuzz {

// The body parsed as the router parses it (no exceptions; an object), then converted.
absl::StatusOr<recipe::ConversationRequest> ConvertBody(recipe::Protocol protocol,
                                                        absl::string_view body);

void FuzzProtocolRequest(recipe::Protocol protocol, absl::string_view body);

}  // namespace tandem::fuzz
