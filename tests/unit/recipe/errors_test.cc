// Conversion failures become each protocol's error envelope.
#include "tandem/recipe/errors.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace tandem::recipe {
namespace {

using Json = nlohmann::json;

TEST(ErrorsTest, RequestErrorIsAnOpenAiInvalidRequest) {
  const ErrorEnvelope e = ToErrorEnvelope(RequestError("bad 'x'"), Protocol::kChatCompletions);
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.body,
            R"({"error":{"message":"bad 'x'","type":"invalid_request_error","param":null,"code":"invalid_request_error"}})");
  EXPECT_EQ(ToErrorEnvelope(RequestError("bad 'x'"), Protocol::kResponses).body, e.body);
}

TEST(ErrorsTest, MessagesGetTheAnthropicEnvelopeAndTheRecipeBodyStaysOpenAi) {
  const absl::Status s = RequestError("messages: at least one message is required");
  const ErrorEnvelope anthropic = ToErrorEnvelope(s, Protocol::kMessages);
  EXPECT_EQ(anthropic.http_status, 400);
  const Json body = Json::parse(anthropic.body);
  EXPECT_EQ(body["type"], "error");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["message"], "messages: at least one message is required");
  EXPECT_EQ(Json::parse(ToRecipeErrorEnvelope(s).body)["error"]["code"], "invalid_request_error");
}

TEST(ErrorsTest, FailureFieldsSurviveTheStatus) {
  const absl::Status s = ConversionFailure(429, "rate_limit_error", "slow down", "model", "rl");
  const ErrorFields f = ErrorFieldsOf(s);
  EXPECT_EQ(f.http_status, 429);
  EXPECT_EQ(f.type, "rate_limit_error");
  EXPECT_EQ(f.param, "model");
  EXPECT_EQ(f.code, "rl");
  EXPECT_EQ(Json::parse(ToErrorEnvelope(s, Protocol::kMessages).body)["error"]["type"],
            "rate_limit_error");
}

TEST(ErrorsTest, PlainStatusesMapByCode) {
  EXPECT_EQ(ToErrorEnvelope(absl::InvalidArgumentError("x"), Protocol::kChatCompletions).http_status,
            400);
  const ErrorEnvelope internal = ToErrorEnvelope(absl::InternalError("boom"), Protocol::kMessages);
  EXPECT_EQ(internal.http_status, 500);
  EXPECT_EQ(Json::parse(internal.body)["error"]["type"], "api_error");
  EXPECT_EQ(ToErrorEnvelope(absl::UnavailableError("x"), Protocol::kChatCompletions).http_status, 503);
}

}  // namespace
}  // namespace tandem::recipe
