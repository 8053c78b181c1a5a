// Anthropic Messages conversion: the rules deepseek-recipe 0.2.0 applies (read off the reference),
// asserted as behaviour: block folding, tool_use / tool_result pairing, thinking, limits, tools.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tandem/recipe/convert.h"

namespace tandem::recipe {
namespace {

using Json = nlohmann::ordered_json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

absl::StatusOr<ConversationRequest> Convert(Json body, ConversionOptions options = {}) {
  if (!body.contains("model")) body["model"] = "DeepSeek-V4-Pro";
  if (!body.contains("max_tokens")) body["max_tokens"] = 64;
  return ConvertMessages(body, options);
}

std::string ErrorOf(Json body) {
  auto r = Convert(std::move(body));
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : std::string(r.status().message());
}

Json Text(const std::string& t) { return {{"type", "text"}, {"text", t}}; }
Json ToolUse(const std::string& id, Json input = Json::object()) {
  return {{"type", "tool_use"}, {"id", id}, {"name", "f"}, {"input", std::move(input)}};
}
Json Result(const std::string& id) {
  return {{"type", "tool_result"}, {"tool_use_id", id}, {"content", "r" + id}};
}
const Json kTools = Json::array({{{"name", "f"}, {"input_schema", {{"type", "object"}}}},
                                 {{"name", "g"}, {"input_schema", {{"type", "object"}}}}});

TEST(ConvertMessagesTest, AssistantBlocksFoldIntoOneTurnAndToolResultsBecomeToolTurns) {
  Json messages = Json::array(
      {{{"role", "user"}, {"content", "q"}},
       {{"role", "assistant"},
        {"content", {{{"type", "thinking"}, {"thinking", "hmm"}, {"signature", "s"}}, Text("a"),
                     Text("b"), ToolUse("t1", {{"x", 1e20}, {"y", "é"}})}}},
       {{"role", "user"}, {"content", {Result("t1"), Text("next")}}}});
  auto r = Convert({{"messages", messages}, {"tools", kTools}});
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& m = r->conversation.messages;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[1].content, "a\n\nb");
  EXPECT_EQ(m[1].reasoning_content, "hmm");
  ASSERT_TRUE(m[1].tool_calls.has_value());
  // Inputs are written the way Python's json.dumps writes them.
  EXPECT_EQ((*m[1].tool_calls)[0].arguments, "{\"x\": 1e+20, \"y\": \"é\"}");
  EXPECT_EQ(m[2].role, Role::kTool);
  EXPECT_EQ(m[2].tool_call_id, "t1");
  EXPECT_EQ(m[3].role, Role::kUser);
  EXPECT_EQ(m[3].content, "next");
}

TEST(ConvertMessagesTest, EachUserBlockIsItsOwnUserTurn) {
  auto r = Convert({{"messages", {{{"role", "user"}, {"content", {Text("a"), Text("b")}}}}}});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->conversation.messages.size(), 2u);
  EXPECT_EQ(r->conversation.messages[1].content, "b");
}

TEST(ConvertMessagesTest, ToolUsesMustBeAnsweredFirstThingInTheNextMessage) {
  Json call = {{"role", "assistant"}, {"content", {ToolUse("t1"), ToolUse("t2")}}};
  Json q = {{"role", "user"}, {"content", "q"}};
  EXPECT_THAT(ErrorOf({{"messages", {q, call, {{"role", "user"}, {"content", {Text("x"), Result("t1"), Result("t2")}}}}}}),
              StartsWith("messages.2: `tool_use` ids were found without `tool_result` blocks "
                         "immediately after: t1, t2."));
  EXPECT_THAT(ErrorOf({{"messages", {q, call}}}),
              StartsWith("messages.1:`tool_use` ids were found without"));
  EXPECT_THAT(ErrorOf({{"messages", {q, call, {{"role", "user"}, {"content", {Result("t1"), Result("t9")}}}}}}),
              StartsWith("unexpected `messages.2.content.1: tool_use_id` found in `tool_result` blocks: t9."));
  EXPECT_EQ(ErrorOf({{"messages", {q, {{"role", "assistant"}, {"content", {ToolUse("t1"), ToolUse("t1")}}}}}}),
            "messages.1.content.1: `tool_use` ids must be unique");
  EXPECT_EQ(ErrorOf({{"messages", {q, {{"role", "assistant"}, {"content", {Result("t1")}}}}}}),
            "messages.1: `tool_result` blocks can only be in `user` messages");
  EXPECT_EQ(ErrorOf({{"messages", {{{"role", "user"}, {"content", Json::array()}}}}}),
            "messages.0: all messages must have non-empty content");
}

TEST(ConvertMessagesTest, SystemTurnsInsideMessagesDependOnTheModelVersion) {
  Json messages = {{{"role", "user"}, {"content", "q"}}, {{"role", "system"}, {"content", "rule"}}};
  auto v4 = Convert({{"messages", messages}, {"system", "top"}});
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(v4->conversation.messages[0].role, Role::kSystem);
  EXPECT_EQ(v4->conversation.messages[2].role, Role::kUser);
  EXPECT_EQ(v4->conversation.messages[2].content, "<system-reminder>\nrule\n</system-reminder>");

  auto v41 = Convert({{"model", "DeepSeek-V4.1-Flash"}, {"messages", messages}});
  ASSERT_TRUE(v41.ok()) << v41.status();
  EXPECT_EQ(v41->conversation.messages[1].role, Role::kSystem);
  EXPECT_EQ(v41->conversation.messages[1].content, "rule");
}

TEST(ConvertMessagesTest, ThinkingSettingsAndEffort) {
  Json messages = {{{"role", "user"}, {"content", "q"}},
                   {{"role", "assistant"}, {"content", {{{"type", "thinking"}, {"thinking", "t"}, {"signature", ""}}, Text("a")}}},
                   {{"role", "user"}, {"content", "q2"}}};
  auto off = Convert({{"messages", messages}, {"thinking", {{"type", "disabled"}}}});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->conversation.thinking_mode);
  EXPECT_FALSE(off->conversation.messages[1].reasoning_content.has_value())
      << "past reasoning is not kept outside thinking mode";

  auto low = Convert({{"messages", messages}, {"output_config", {{"effort", "low"}}}});
  ASSERT_TRUE(low.ok());
  EXPECT_TRUE(low->conversation.thinking_mode);
  EXPECT_EQ(low->conversation.reasoning_effort, ReasoningEffort::kLow);

  auto none = Convert({{"messages", messages}, {"output_config", {{"effort", "none"}}}});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->conversation.thinking_mode);
}

TEST(ConvertMessagesTest, MaxTokensIsLoweredToTheBoundButZeroIsRefused) {
  auto r = Convert({{"messages", {{{"role", "user"}, {"content", "q"}}}}, {"max_tokens", 1000000}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->inference.max_tokens, 393216);
  EXPECT_EQ(ErrorOf({{"messages", {{{"role", "user"}, {"content", "q"}}}}, {"max_tokens", 0}}),
            "Invalid max_tokens value, the valid range of max_tokens is [1, 393216]");
}

TEST(ConvertMessagesTest, StopSequencesGoToTheParserAndMustNotBeEmpty) {
  auto r = Convert({{"messages", {{{"role", "user"}, {"content", "q"}}}}, {"stop_sequences", {"END", "<｜User｜>"}}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->parsing.stop_sequences, (std::vector<std::string>{"END", "<｜User｜>"}));
  EXPECT_THAT(ErrorOf({{"messages", {{{"role", "user"}, {"content", "q"}}}}, {"stop_sequences", {""}}}),
              StartsWith("Invalid 'stop[0]': empty string."));
}

TEST(ConvertMessagesTest, ToolChoices) {
  Json base = {{"messages", {{{"role", "user"}, {"content", "q"}}}}, {"tools", kTools}};
  Json any = base;
  any["tool_choice"] = {{"type", "any"}};
  auto r = Convert(any);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->conversation.tool_choice, ToolChoice::kAuto) << "any reads as auto";

  Json named = base;
  named["tool_choice"] = {{"type", "tool"}, {"name", "g"}};
  EXPECT_EQ(ErrorOf(named), "Thinking mode does not support this tool_choice");
  named["thinking"] = {{"type", "disabled"}};
  r = Convert(named);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->conversation.tools.size(), 1u);
  EXPECT_EQ(r->conversation.tools[0].name, "g");
  EXPECT_EQ(r->conversation.tool_choice, ToolChoice::kRequired);

  Json none = base;
  none["tool_choice"] = {{"type", "none"}};
  r = Convert(none);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->conversation.tools.empty());
}

TEST(ConvertMessagesTest, ServerToolsAreRefusedExceptWebSearchWhenDropped) {
  Json body = {{"messages", {{{"role", "user"}, {"content", "q"}}}},
               {"tools", {{{"type", "web_search_20250305"}, {"name", "web_search"}}}}};
  EXPECT_EQ(ErrorOf(body), "tools[0]: server tools are not supported");
  ConversionOptions drop;
  drop.messages_web_search = WebSearchBehavior::kDrop;
  auto r = Convert(body, drop);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->conversation.tools.empty());
}

TEST(ConvertMessagesTest, ImagesArePlaceholdersForV4AndDataUrlsForV41) {
  Json image = {{"type", "image"},
                {"source", {{"type", "base64"}, {"media_type", "image/png"}, {"data", "AAAA"}}}};
  Json messages = {{{"role", "user"}, {"content", {image}}}};
  auto v4 = Convert({{"messages", messages}});
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(v4->conversation.messages[0].content, "[Unsupported Image]");

  auto v41 = Convert({{"model", "DeepSeek-V4.1-Flash"}, {"messages", messages}});
  ASSERT_TRUE(v41.ok()) << v41.status();
  const Message& m = v41->conversation.messages[0];
  ASSERT_EQ(m.image_sources.size(), 1u);
  EXPECT_EQ(m.image_sources[0].kind, ImageSource::Kind::kDataUrl);
  EXPECT_EQ(m.image_sources[0].data, "data:image/png;base64,AAAA");
  EXPECT_EQ(m.image_sources[0].path, "messages.0.content[0]");
}

TEST(ConvertMessagesTest, ShapeErrorsUseTheSchemaWording) {
  EXPECT_EQ(ErrorOf({{"messages", {{{"role", "tool"}, {"content", "x"}}}}}),
            "invalid request body: unknown variant `tool`, expected one of `user`, `assistant`, `system`");
  EXPECT_EQ(ErrorOf({{"messages", {{{"role", "user"}, {"content", 5}}}}}),
            "invalid request body: expected a string or a list");
  EXPECT_EQ(ErrorOf({{"messages", Json::array()}}), "messages: at least one message is required");
}

}  // namespace
}  // namespace tandem::recipe
