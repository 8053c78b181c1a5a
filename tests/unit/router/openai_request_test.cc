// ParseOpenAiRequest on bodies the fuzzer (tests/fuzz/router_completions_fuzz.cc) found wrong.
#include "api/endpoints/openai_request.h"

#include <gtest/gtest.h>

#include "tandem/engine/sampling.h"

namespace tandem::router {
namespace {

TEST(OpenAiRequestTest, ARangeHoldsForTheFloatTheEngineGets) {
  // 1e-50 is in (0, 1] as a double but 0 as the float the engine checks: refused here, naming
  // the field, instead of failing later in the engine.
  for (const char* body : {R"({"prompt": "x", "top_p": 1e-50})",
                           R"({"prompt": "x", "repetition_penalty": 1e-300})"}) {
    OpenAiRequest request;
    std::optional<ApiError> error = ParseOpenAiRequest(body, &request);
    ASSERT_TRUE(error.has_value()) << body;
    EXPECT_EQ(error->http_status, 400);
    EXPECT_FALSE(error->param.empty());
  }
  OpenAiRequest request;
  ASSERT_FALSE(ParseOpenAiRequest(R"({"prompt": "x", "top_p": 1e-30, "temperature": 1e-50})",
                                  &request));
  EXPECT_TRUE(engine::ValidateSamplingParams(request.sampling, 512).ok());
}

}  // namespace
}  // namespace tandem::router
