// OpenAI Responses conversion: the rules deepseek-recipe 0.2.0 applies (read off the reference),
// asserted as behaviour: item grouping, call/output pairing, tool declarations, effort, images.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tandem/recipe/convert.h"
#include "tandem/recipe/render.h"

namespace tandem::recipe {
namespace {

using Json = nlohmann::ordered_json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<ConversationRequest> Convert(Json body, ConversionOptions options = {}) {
  if (!body.contains("model")) body["model"] = "DeepSeek-V4-Pro";
  return ConvertResponses(body, options);
}

std::string ErrorOf(Json body) {
  auto r = Convert(std::move(body));
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : std::string(r.status().message());
}

Json Call(const std::string& id, const std::string& name = "f") {
  return {{"type", "function_call"}, {"call_id", id}, {"name", name}, {"arguments", "{}"}};
}
Json Output(const std::string& id) {
  return {{"type", "function_call_output"}, {"call_id", id}, {"output", "out " + id}};
}
Json User(const std::string& text) { return {{"role", "user"}, {"content", text}}; }
const Json kTools = Json::array({{{"type", "function"}, {"name", "f"}},
                                 {{"type", "function"}, {"name", "g"}}});

TEST(ConvertResponsesTest, StringInputAndInstructionsBecomeUserAndSystemTurns) {
  auto r = Convert({{"input", "hello"}, {"instructions", "be brief"}});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->conversation.messages.size(), 2u);
  EXPECT_EQ(r->conversation.messages[0].role, Role::kSystem);
  EXPECT_EQ(r->conversation.messages[0].content, "be brief");
  EXPECT_EQ(r->conversation.messages[1].role, Role::kUser);
  EXPECT_EQ(r->echo["instructions"], "be brief");

  auto empty = Convert({{"input", "hello"}, {"instructions", ""}});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->conversation.messages.size(), 1u) << "empty instructions add no turn";
  EXPECT_EQ(ErrorOf(Json::object()), "Either input or instructions must be provided");
}

TEST(ConvertResponsesTest, ReasoningTextAndCallsFormOneAssistantTurnWithOutputsInIdOrder) {
  Json input = Json::array({User("q"),
                            {{"type", "reasoning"}, {"summary", Json::array()},
                             {"content", Json::array({{{"type", "reasoning_text"}, {"text", "think"}}})}},
                            {{"role", "assistant"}, {"content", "calling"}},
                            Call("b"), Call("a", "g"), Output("b"), Output("a")});
  auto r = Convert({{"input", input}, {"tools", kTools}});
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& m = r->conversation.messages;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[1].role, Role::kAssistant);
  EXPECT_EQ(m[1].content, "calling");
  EXPECT_EQ(m[1].reasoning_content, "think");
  ASSERT_TRUE(m[1].tool_calls.has_value());
  EXPECT_EQ((*m[1].tool_calls)[0].id, "a");
  EXPECT_EQ((*m[1].tool_calls)[1].id, "b");
  EXPECT_EQ(m[2].tool_call_id, "a");
  EXPECT_EQ(m[3].tool_call_id, "b");
  EXPECT_EQ(m[3].content, "out b");
  EXPECT_TRUE(r->parsing.parse_tool_calls);
}

TEST(ConvertResponsesTest, EveryCallIsAnsweredRightAfterItsTurnAndOnlyOnce) {
  EXPECT_EQ(ErrorOf({{"input", {User("q"), Call("c1"), User("mid"), Output("c1")}}, {"tools", kTools}}),
            "No tool output found for tool call c1.");
  EXPECT_EQ(ErrorOf({{"input", {User("q"), Output("zz")}}, {"tools", kTools}}),
            "No tool call found for tool output with call_id zz.");
  EXPECT_EQ(ErrorOf({{"input", {User("q"), Call("c1"), Output("c1"), Output("c1")}}, {"tools", kTools}}),
            "Duplicate tool output for call_id: c1.");
  EXPECT_EQ(ErrorOf({{"input", {User("q"), Call("c1"), Call("c1")}}, {"tools", kTools}}),
            "Duplicate 'call_id': c1.");
  EXPECT_THAT(ErrorOf({{"input", {User("q"), Call("")}}, {"tools", kTools}}),
              HasSubstr("Invalid 'input[1].call_id': empty string"));
}

TEST(ConvertResponsesTest, ToolChoiceNoneTakesToolsOutOfPlayBeforeTheirSchemasAreChecked) {
  Json bad = Json::array({{{"type", "function"}, {"name", "f"}, {"parameters", {{"type", "string"}}}}});
  EXPECT_THAT(ErrorOf({{"input", "q"}, {"tools", bad}}), HasSubstr("Invalid schema for function 'f'"));
  auto r = Convert({{"input", "q"}, {"tools", bad}, {"tool_choice", "none"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->conversation.tools.empty());
  EXPECT_EQ(r->conversation.tool_choice, ToolChoice::kNone);
  EXPECT_FALSE(r->parsing.parse_tool_calls);
}

TEST(ConvertResponsesTest, NamedFunctionChoiceKeepsThatToolOutsideThinkingMode) {
  Json body = {{"input", "q"}, {"tools", kTools}, {"tool_choice", {{"type", "function"}, {"name", "g"}}}};
  EXPECT_EQ(ErrorOf(body), "Thinking mode does not support this tool_choice");
  body["reasoning"] = {{"effort", "none"}};
  auto r = Convert(body);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->conversation.tools.size(), 1u);
  EXPECT_EQ(r->conversation.tools[0].name, "g");
  EXPECT_EQ(r->conversation.tool_choice, ToolChoice::kRequired);
  EXPECT_TRUE(r->parsing.starts_in_tool_calls);
  ASSERT_TRUE(r->inference.output_constraint.has_value());
  EXPECT_EQ(r->inference.output_constraint->kind, "tool_call_required");
}

TEST(ConvertResponsesTest, EffortNamesMapOntoTheModelsFourLevelsAndNoneTurnsThinkingOff) {
  auto effort_of = [](const char* name) {
    auto r = Convert({{"input", "q"}, {"reasoning", {{"effort", name}}}});
    EXPECT_TRUE(r.ok()) << r.status();
    return r->conversation.reasoning_effort;
  };
  EXPECT_EQ(effort_of("minimal"), ReasoningEffort::kLow);
  EXPECT_EQ(effort_of("medium"), ReasoningEffort::kHigh);
  EXPECT_EQ(effort_of("xhigh"), ReasoningEffort::kXHigh);
  EXPECT_EQ(effort_of("ultra"), ReasoningEffort::kMax);
  auto off = Convert({{"input", "q"}, {"reasoning", {{"effort", "none"}}}, {"temperature", 0.5}});
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->conversation.thinking_mode);
  EXPECT_FALSE(off->parsing.thinking_initial_stage.has_value());
  EXPECT_EQ(*off->inference.temperature, static_cast<double>(0.5f));
  EXPECT_THAT(ErrorOf({{"input", "q"}, {"reasoning", {{"effort", "extreme"}}}}),
              HasSubstr("unknown variant `extreme`"));
}

TEST(ConvertResponsesTest, ThinkingModeSamplesAtTemperatureOneAndV4NarrowsTopPWithTools) {
  auto r = Convert({{"input", "q"}, {"tools", kTools}, {"temperature", 0.2}, {"top_p", 0.3}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r->inference.temperature, 1.0);
  EXPECT_EQ(*r->inference.top_p, static_cast<double>(0.95f));
  EXPECT_EQ(r->echo["top_p"], 0.3) << "the response reports the requested value";
}

TEST(ConvertResponsesTest, NamespaceToolsAreFlattenedPerModelVersion) {
  Json tools = Json::array({{{"type", "namespace"}, {"name", "fs"}, {"description", "Files"},
                             {"tools", Json::array({{{"type", "function"}, {"name", "open"}, {"description", "Open one"}}})}}});
  auto v4 = Convert({{"input", "q"}, {"tools", tools}});
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(v4->conversation.tools[0].name, "fs__open");
  EXPECT_EQ(v4->conversation.tools[0].description, "Open one");
  EXPECT_EQ(v4->echo["namespace_tool_map"]["fs__open"], Json::array({"fs", "open"}));

  auto v41 = Convert({{"model", "DeepSeek-V4.1-Flash"}, {"input", "q"}, {"tools", tools}});
  ASSERT_TRUE(v41.ok()) << v41.status();
  EXPECT_EQ(v41->conversation.tools[0].name, "fs::open");
  EXPECT_EQ(v41->conversation.tools[0].description, "Files\nOpen one");
}

TEST(ConvertResponsesTest, OnlyTheApplyPatchCustomToolIsKnown) {
  auto r = Convert({{"input", "q"}, {"tools", {{{"type", "custom"}, {"name", "apply_patch"}}}}});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->conversation.tools.size(), 1u);
  EXPECT_EQ(r->conversation.tools[0].parameters["required"], Json::array({"input"}));
  EXPECT_EQ(ErrorOf({{"input", "q"}, {"tools", {{{"type", "custom"}, {"name", "shell"}}}}}),
            "Unsupported custom tool: 'shell'. Only 'apply_patch' is supported.");
}

TEST(ConvertResponsesTest, WebSearchIsDroppedOrRefusedPerOptions) {
  Json body = {{"input", "q"}, {"tools", {{{"type", "web_search"}}}}};
  auto dropped = Convert(body);
  ASSERT_TRUE(dropped.ok());
  EXPECT_TRUE(dropped->conversation.tools.empty());
  ConversionOptions reject;
  reject.responses_web_search = WebSearchBehavior::kReject;
  auto refused = Convert(body, reject);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "Server tools are not supported");
}

TEST(ConvertResponsesTest, ImagesArePlaceholdersForV4AndSourcesForV41) {
  Json content = Json::array({{{"type", "input_text"}, {"text", "see <｜image｜>"}},
                              {{"type", "input_image"}, {"image_url", "https://x/a.png"}, {"detail", "low"}}});
  auto v4 = Convert({{"input", {{{"role", "user"}, {"content", content}}}}});
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(v4->conversation.messages[0].content, "see <｜image｜>\n\n[Unsupported Image]");
  EXPECT_TRUE(v4->conversation.messages[0].image_sources.empty());

  auto v41 = Convert({{"model", "DeepSeek-V4.1-Flash"}, {"input", {{{"role", "user"}, {"content", content}}}}});
  ASSERT_TRUE(v41.ok()) << v41.status();
  const Message& m = v41->conversation.messages[0];
  ASSERT_EQ(m.image_sources.size(), 1u);
  EXPECT_EQ(m.image_sources[0].kind, ImageSource::Kind::kUrl);
  EXPECT_EQ(m.image_sources[0].detail, ImageDetail::kLow);
  // The placeholder is the converter's, not the spelling the client typed before it.
  EXPECT_THAT(m.image_offsets, ElementsAre(m.content.rfind(std::string(kImageToken))));

  Json file = {{"model", "DeepSeek-V4.1-Flash"},
               {"input", {{{"role", "user"}, {"content", {{{"type", "input_image"}, {"file_id", "f"}}}}}}}};
  EXPECT_THAT(ErrorOf(file), HasSubstr("file_id is not supported"));
}

TEST(ConvertResponsesTest, ShapeErrorsUseTheSchemaWording) {
  EXPECT_EQ(ErrorOf({{"model", 5}, {"input", "q"}}),
            "invalid request body: invalid type: integer `5`, expected a string");
  EXPECT_EQ(ErrorOf({{"input", 5}}), "invalid request body: input should be a string or a list of input items");
  EXPECT_EQ(ErrorOf({{"input", {{{"role", "tool"}, {"content", "x"}}}}}),
            "invalid request body: unknown variant `tool`, expected one of `user`, `assistant`, "
            "`system`, `developer`");
  EXPECT_EQ(ErrorOf({{"input", "q"}, {"max_output_tokens", 0}}),
            "Invalid max_tokens value, the valid range of max_tokens is [1, 393216]");
}

TEST(ConvertResponsesTest, JsonObjectFormatNeedsTheWordJsonInTheConversation) {
  EXPECT_THAT(ErrorOf({{"input", "q"}, {"text", {{"format", {{"type", "json_object"}}}}}}),
              HasSubstr("must contain the word 'json'"));
  auto r = Convert({{"input", "Reply in JSON"}, {"text", {{"format", {{"type", "json_object"}}}}}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->conversation.response_format, ResponseFormat::kJsonObject);
  EXPECT_TRUE(r->parsing.parse_json_output);
}

}  // namespace
}  // namespace tandem::recipe
