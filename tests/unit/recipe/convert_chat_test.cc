// Chat Completions conversion: what deepseek-recipe 0.2.0 accepts, rejects and produces (the
// expected messages were read off the reference).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tandem/recipe/convert.h"
#include "tandem/recipe/errors.h"
#include "tandem/recipe/render.h"

namespace tandem::recipe {
namespace {

using Json = nlohmann::ordered_json;

absl::StatusOr<ConversationRequest> Convert(const std::string& body) {
  return ConvertChatCompletions(Json::parse(body), ConversionOptions());
}

std::string ErrorMessage(const std::string& body) {
  auto r = Convert(body);
  EXPECT_FALSE(r.ok()) << body;
  return r.ok() ? "" : std::string(r.status().message());
}

TEST(ConvertChatTest, DefaultsFollowTheModelAndThinkingMode) {
  auto r = Convert(R"({"model": "DeepSeek-V4.1-Flash", "messages": [{"role": "user", "content": "hi"}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model_version, ModelVersion::kDeepseekV41);
  EXPECT_TRUE(r->conversation.thinking_mode);
  EXPECT_EQ(r->conversation.reasoning_effort, ReasoningEffort::kHigh);
  EXPECT_EQ(r->parsing.thinking_initial_stage, ThinkingInitialStage::kReasoningStart);
  EXPECT_EQ(r->inference.temperature, 1.0);

  r = Convert(R"({"model": "DeepSeek-V4-Pro", "thinking": {"type": "disabled"}, "temperature": 0.5,
                  "messages": [{"role": "user", "content": "hi"},
                               {"role": "assistant", "content": "a", "reasoning_content": "r"},
                               {"role": "user", "content": "again"}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->conversation.reasoning_effort.has_value());
  EXPECT_FALSE(r->conversation.messages[1].reasoning_content.has_value());
  EXPECT_FALSE(r->parsing.thinking_initial_stage.has_value());
  EXPECT_EQ(r->inference.temperature, 0.5);
}

TEST(ConvertChatTest, EffortNamesMapOntoFourLevels) {
  auto effort = [](const std::string& name) {
    auto r = Convert(R"({"model": "DeepSeek-V4-Pro", "reasoning_effort": ")" + name +
                     R"(", "messages": [{"role": "user", "content": "hi"}]})");
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->conversation.reasoning_effort : std::nullopt;
  };
  EXPECT_EQ(effort("minimal"), ReasoningEffort::kLow);
  EXPECT_EQ(effort("medium"), ReasoningEffort::kHigh);
  EXPECT_EQ(effort("ultra"), ReasoningEffort::kMax);
  EXPECT_EQ(effort("none"), std::nullopt);  // "none" turns thinking off
}

TEST(ConvertChatTest, ToolResultsMustAnswerThePrecedingCalls) {
  EXPECT_EQ(ErrorMessage(R"({"model": "DeepSeek-V4-Pro", "messages": [
                {"role": "user", "content": "q"},
                {"role": "tool", "tool_call_id": "c1", "content": "r"}]})"),
            "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'");
  EXPECT_THAT(ErrorMessage(R"({"model": "DeepSeek-V4-Pro", "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                    "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "user", "content": "no result"}]})"),
              ::testing::HasSubstr("insufficient tool messages"));
}

TEST(ConvertChatTest, ToolChoiceNoneDropsTheToolsAndNamedChoiceKeepsOne) {
  auto r = Convert(R"({"model": "DeepSeek-V4-Pro", "tool_choice": "none",
                       "tools": [{"type": "function", "function": {"name": "f"}}],
                       "messages": [{"role": "user", "content": "hi"}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->conversation.tools.empty());
  EXPECT_FALSE(r->parsing.parse_tool_calls);

  r = Convert(R"({"model": "DeepSeek-V4-Pro", "thinking": {"type": "disabled"},
                  "tool_choice": {"type": "function", "function": {"name": "g"}},
                  "tools": [{"type": "function", "function": {"name": "f"}},
                            {"type": "function", "function": {"name": "g"}}],
                  "messages": [{"role": "user", "content": "hi"}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->conversation.tools.size(), 1u);
  EXPECT_EQ(r->conversation.tools[0].name, "g");
  EXPECT_EQ(r->conversation.tool_choice, ToolChoice::kRequired);
  EXPECT_TRUE(r->parsing.starts_in_tool_calls);
  ASSERT_TRUE(r->inference.output_constraint.has_value());
  EXPECT_EQ(r->inference.output_constraint->kind, "tool_call_required");
}

TEST(ConvertChatTest, StrictToolSchemasAreClosed) {
  auto r = Convert(R"({"model": "DeepSeek-V4-Pro", "messages": [{"role": "user", "content": "hi"}],
      "tools": [{"type": "function", "function": {"name": "f", "strict": true,
                 "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->conversation.tools[0].parameters.dump(),
            R"({"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false,"required":["a"]})");
}

TEST(ConvertChatTest, MalformedBodiesNameTheProblem) {
  EXPECT_EQ(ErrorMessage(R"({"messages": []})"), "invalid request body: missing field `model`");
  EXPECT_EQ(ErrorMessage(R"({"model": "DeepSeek-V4-Pro", "messages": [{"role": "developer", "content": "x"}]})"),
            "invalid request body: unknown variant `developer`, expected one of `system`, `user`, "
            "`assistant`, `tool`, `latest_reminder`");
  EXPECT_EQ(ErrorMessage(R"({"model": "DeepSeek-V4-Pro", "temperature": "hot", "messages": []})"),
            "invalid request body: invalid type: string \"hot\", expected f32");
  EXPECT_EQ(ErrorMessage(R"({"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]})"),
            "The supported API model names are DeepSeek-V4-Pro, DeepSeek-V4.1-Flash, but you "
            "passed gpt-4o.");
  EXPECT_EQ(ErrorMessage(R"({"model": "DeepSeek-V4-Pro", "response_format": {"type": "json_object"},
                              "messages": [{"role": "user", "content": "x"}]})"),
            "Prompt must contain the word 'json' in some form to use 'response_format' of type "
            "'json_object'.");
  EXPECT_EQ(ErrorMessage(R"({"model": "DeepSeek-V4-Pro", "tools": [{"type": "function",
                              "function": {"name": "f", "parameters": {"type": "string"}}}],
                              "messages": [{"role": "user", "content": "x"}]})"),
            "Invalid schema for function 'f': schema must be a JSON Schema of 'type: \"object\"', "
            "got 'type: \"string\"'.");
}

TEST(ConvertChatTest, ImagesArePlaceholdersOnlyForV41) {
  const std::string messages = R"("messages": [{"role": "user", "content": [
      {"type": "text", "text": "see <｜image｜>"},
      {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}])";
  auto v4 = Convert(R"({"model": "DeepSeek-V4-Pro", )" + messages + "}");
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(v4->conversation.messages[0].content, "see <｜image｜>\n\n[Unsupported Image]");
  auto v41 = Convert(R"({"model": "DeepSeek-V4.1-Flash", )" + messages + "}");
  ASSERT_TRUE(v41.ok()) << v41.status();
  const Message& m = v41->conversation.messages[0];
  EXPECT_EQ(m.content, "see <｜image｜>\n\n<｜image｜>");
  ASSERT_EQ(m.image_sources.size(), 1u);
  EXPECT_EQ(m.image_offsets, std::vector<std::size_t>{m.content.rfind("<｜image｜>")});
}

TEST(ConvertChatTest, PrefixOnlyOnTheFinalAssistantMessage) {
  auto stage = [](const std::string& prefix) {
    auto r = Convert(R"({"model": "DeepSeek-V4-Pro", "messages": [{"role": "user", "content": "q"},
                         )" + prefix + "]}");
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->parsing.thinking_initial_stage : std::nullopt;
  };
  EXPECT_EQ(stage(R"({"role": "assistant", "content": "", "prefix": true})"),
            ThinkingInitialStage::kReasoningStart);
  EXPECT_EQ(stage(R"({"role": "assistant", "content": "", "reasoning_content": "r", "prefix": true})"),
            ThinkingInitialStage::kReasoningContinuation);
  EXPECT_EQ(stage(R"({"role": "assistant", "content": "a", "prefix": true})"),
            ThinkingInitialStage::kContentContinuation);
  EXPECT_EQ(ErrorMessage(R"({"model": "DeepSeek-V4-Pro", "messages": [
                {"role": "assistant", "content": "p", "prefix": true},
                {"role": "user", "content": "q"}]})"),
            "Invalid completion message: prefix set true with message which is not final message "
            "or message role is not assistant");
}

TEST(ResolveMaxTokensTest, DefaultsByModeAndContextLeft) {
  auto r = Convert(R"({"model": "DeepSeek-V4-Pro", "messages": [{"role": "user", "content": "q"}]})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*ResolveMaxTokens(*r, 0, 1 << 20), 65536);
  EXPECT_EQ(*ResolveMaxTokens(*r, 10, 100), 90);
  EXPECT_EQ(*ResolveMaxTokens(*r, 100, 100), 1);
  auto over = ResolveMaxTokens(*r, 101, 100);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(ErrorFieldsOf(over.status()).http_status, 400);
  r->conversation.reasoning_effort = ReasoningEffort::kMax;
  EXPECT_EQ(*ResolveMaxTokens(*r, 0, 1 << 20), 131072);
  r->conversation.thinking_mode = false;
  EXPECT_EQ(*ResolveMaxTokens(*r, 0, 1 << 20), 8192);
  r->inference.max_tokens = 50;
  EXPECT_EQ(*ResolveMaxTokens(*r, 10, 100), 50);
  EXPECT_THAT(std::string(ResolveMaxTokens(*r, 51, 100).status().message()),
              ::testing::HasSubstr("you requested 101 tokens (51 in the messages, 50 in the completion)"));
}

}  // namespace
}  // namespace tandem::recipe
