// A /v1/completions body as the router's GenerationApi receives it: ParseOpenAiRequest, the engine's
// range checks of the sampling parameters it produced, and the error body of a rejection.
#include <cstdint>

#include "api/endpoints/openai_request.h"
#include "fuzz_util.h"
#include "nlohmann/json.hpp"
#include "tandem/engine/sampling.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tandem::router::OpenAiRequest request;
  if (auto error = tandem::router::ParseOpenAiRequest(tandem::fuzz::AsText(data, size), &request)) {
    if (error->http_status != 400) __builtin_trap();
    if (!nlohmann::json::accept(error->ToJson())) __builtin_trap();
    return 0;
  }
  if (!request.prompt_text.has_value() && request.prompt_ids.empty()) __builtin_trap();
  // The router rejects out-of-vocabulary ids later; the sampling ranges must already hold.
  if (!tandem::engine::ValidateSamplingParams(request.sampling, /*vocab_size=*/512).ok()) {
    __builtin_trap();
  }
  return 0;
}
