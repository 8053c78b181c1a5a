#include "recipe_request.h"

#include "byte_tokenizer.h"
#include "nlohmann/json.hpp"
#include "tandem/recipe/convert.h"
#include "tandem/recipe/errors.h"
#include "tandem/recipe/render.h"
#include "tandem/recipe/stream_processor.h"

namespace tandem::fuzz {
namespace {

using recipe::Protocol;

const recipe::ConversionOptions& Options() {
  static const recipe::ConversionOptions* options = [] {
    auto* o = new recipe::ConversionOptions;
    o->model_versions_by_name["tandem-fuzz"] = recipe::ModelVersion::kDeepseekV4;
    return o;
  }();
  return *options;
}

}  // namespace

absl::StatusOr<recipe::ConversationRequest> ConvertBody(Protocol protocol, absl::string_view text) {
  const nlohmann::ordered_json body =
      nlohmann::ordered_json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return recipe::RequestError("the request body is not valid JSON");
  if (!body.is_object()) return recipe::RequestError("the request body must be a JSON object");
  switch (protocol) {
    case Protocol::kChatCompletions: return recipe::ConvertChatCompletions(body, Options());
    case Protocol::kResponses: return recipe::ConvertResponses(body, Options());
    case Protocol::kMessages: return recipe::ConvertMessages(body, Options());
  }
  __builtin_trap();
}

void FuzzProtocolRequest(Protocol protocol, absl::string_view text) {
  absl::StatusOr<recipe::ConversationRequest> request = ConvertBody(protocol, text);
  if (!request.ok()) {
    const recipe::ErrorEnvelope envelope = recipe::ToErrorEnvelope(request.status(), protocol);
    // Every rejection must be a client error the SDKs can parse, never a 500.
    if (envelope.http_status < 400 || envelope.http_status >= 500) __builtin_trap();
    if (!nlohmann::json::accept(envelope.body)) __builtin_trap();
    return;
  }
  for (recipe::ModelVersion version :
       {recipe::ModelVersion::kDeepseekV4, recipe::ModelVersion::kDeepseekV41}) {
    const recipe::RenderedPrompt rendered = recipe::RenderConversation(request->conversation,
                                                                       version);
    absl::StatusOr<std::vector<std::int32_t>> ids = recipe::EncodePrompt(rendered, ByteTokenizer());
    const std::int64_t prompt_tokens = ids.ok() ? static_cast<std::int64_t>(ids->size()) : 1;
    (void)recipe::ResolveMaxTokens(*request, prompt_tokens, 4096);
  }
  (void)recipe::RenderPlainConversation(request->conversation);
  // The response side echoes parts of the request (Responses' instructions, tools...).
  recipe::StreamProcessor processor(*request, "fuzz-1", request->model, 1700000000);
  processor.SetToolCallIdGenerator([](int index) { return "call_" + std::to_string(index); });
  (void)processor.Ready({.prompt_tokens = 3});
  (void)processor.Push("ok", 1);
  (void)processor.Finish(recipe::FinishReason::kStop);
  (void)processor.FinalResponse();
}

}  // namespace tandem::fuzz
