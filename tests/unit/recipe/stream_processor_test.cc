// StreamProcessor: event shapes and accumulated responses of the three protocols. Field names,
// orders and values are deepseek-recipe 0.2.0's (probed with its Python binding); the full
// differential comparison is tests/conformance/test_recipe_parse.py.
#include "tandem/recipe/stream_processor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace tandem::recipe {
namespace {

using ::testing::ElementsAre;
using Json = nlohmann::ordered_json;

const std::string kDsml = "\xEF\xBD\x9C" "DSML\xEF\xBD\x9C";

std::string ToolBlock() {
  return "\n\n<" + kDsml + "tool_calls>\n<" + kDsml + "invoke name=\"get_w\">\n<" + kDsml +
         "parameter name=\"city\" string=\"true\">Paris</" + kDsml + "parameter>\n</" + kDsml +
         "invoke>\n</" + kDsml + "tool_calls>";
}

ConversationRequest Request(Protocol protocol, bool thinking, bool tools) {
  ConversationRequest request;
  request.protocol = protocol;
  request.model = "DeepSeek-V4-Pro";
  request.parsing.parse_tool_calls = tools;
  if (thinking) request.parsing.thinking_initial_stage = ThinkingInitialStage::kReasoningStart;
  return request;
}

struct Outcome {
  std::vector<OutputEvent> events;
  Json final_response;
};

Outcome Process(StreamProcessor& processor, const std::vector<std::string>& pieces,
            FinishReason reason = FinishReason::kStop) {
  Outcome run;
  auto take = [&](std::vector<OutputEvent> events) {
    for (OutputEvent& event : events) run.events.push_back(std::move(event));
  };
  take(processor.Ready({.prompt_tokens = 10, .prompt_cache_hit_tokens = 4}));
  for (const std::string& piece : pieces) take(processor.Push(piece, 1));
  take(processor.Finish(reason));
  run.final_response = Json::parse(processor.FinalResponse());
  return run;
}

Json Data(const OutputEvent& event) { return Json::parse(event.data); }

void SequentialIds(StreamProcessor& processor) {
  processor.SetToolCallIdGenerator([](int index) { return "call_" + std::to_string(index); });
}

TEST(ChatChunksTest, ThinkingStreamAndFinalResponse) {
  ConversationRequest request = Request(Protocol::kChatCompletions, true, true);
  StreamProcessor processor(request, "chatcmpl-1", "DeepSeek-V4-Pro", 1700000000);
  SequentialIds(processor);
  Outcome run = Process(processor, {"\nhmm</th", "ink>\n\nHello", ToolBlock()});

  Json first = Data(run.events.front());
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["created"], 1700000000);
  EXPECT_EQ(first["choices"][0]["delta"].dump(),
            R"({"role":"assistant","content":null,"reasoning_content":""})");
  EXPECT_TRUE(first["usage"].is_null());

  Json last = Data(run.events.back());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(last["usage"].dump(),
            R"({"prompt_tokens":10,"completion_tokens":3,"total_tokens":13,)"
            R"("prompt_tokens_details":{"cached_tokens":4},"prompt_cache_hit_tokens":4,)"
            R"("prompt_cache_miss_tokens":6})");

  const Json& message = run.final_response["choices"][0]["message"];
  EXPECT_EQ(message["content"], "Hello");
  EXPECT_EQ(message["reasoning_content"], "hmm");
  EXPECT_EQ(message["tool_calls"][0]["id"], "call_0");
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_w");
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], R"({"city": "Paris"})");
  EXPECT_EQ(run.final_response["choices"][0]["finish_reason"], "tool_calls");
}

TEST(ChatChunksTest, NonThinkingDeltasHaveNoReasoningField) {
  ConversationRequest request = Request(Protocol::kChatCompletions, false, false);
  StreamProcessor processor(request, "c", "m", 1);
  Outcome run = Process(processor, {"ab"}, FinishReason::kLength);
  EXPECT_EQ(Data(run.events[0])["choices"][0]["delta"].dump(), R"({"role":"assistant","content":""})");
  EXPECT_EQ(Data(run.events[1])["choices"][0]["delta"].dump(), R"({"content":"ab"})");
  EXPECT_EQ(run.final_response["choices"][0]["message"].dump(),
            R"({"role":"assistant","content":"ab"})");
  EXPECT_EQ(run.final_response["choices"][0]["finish_reason"], "length");
}

TEST(ChatChunksTest, StreamWithoutIncludeUsageOmitsTheKeyUntilTheLastChunk) {
  ConversationRequest request = Request(Protocol::kChatCompletions, false, false);
  request.stream = true;
  StreamProcessor processor(request, "c", "m", 1);
  Outcome run = Process(processor, {"ab"});
  EXPECT_FALSE(Data(run.events[0]).contains("usage"));
  EXPECT_FALSE(Data(run.events[1]).contains("usage"));
  EXPECT_TRUE(Data(run.events.back())["usage"].is_object());
  EXPECT_EQ(StreamProcessor::SseDoneData(Protocol::kChatCompletions), "[DONE]");
}

TEST(StreamProcessorTest, StopSequenceFinishesTheStream) {
  ConversationRequest request = Request(Protocol::kChatCompletions, false, false);
  request.parsing.stop_sequences = {"STOP"};
  StreamProcessor processor(request, "c", "m", 1);
  processor.Ready({});
  std::vector<OutputEvent> events = processor.Push("one STOP two", 1);
  EXPECT_TRUE(processor.finished());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(Data(events[0])["choices"][0]["delta"]["content"], "one ");
  EXPECT_EQ(Data(events[1])["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(processor.Push("more", 1).empty());
  EXPECT_TRUE(processor.Finish(FinishReason::kStop).empty());
  EXPECT_EQ(Json::parse(processor.FinalResponse())["usage"]["completion_tokens"], 1);
}

TEST(StreamProcessorTest, CountsReasoningTokensPerPushedToken) {
  ConversationRequest request = Request(Protocol::kChatCompletions, true, false);
  StreamProcessor processor(request, "c", "m", 1);
  processor.CountReasoningTokens(true);
  // "\n\n" is stripped and the "\n\n" before </think> belongs to the tag: neither counts.
  Outcome run = Process(processor, {"\n\n", "ab", " cd", "\n\n", "</think>", "x"});
  EXPECT_EQ(run.final_response["usage"]["completion_tokens_details"]["reasoning_tokens"], 2);
  EXPECT_EQ(run.final_response["usage"]["completion_tokens"], 6);
}

TEST(ResponsesEventsTest, ItemsOpenLazilyAndSequenceNumbersCount) {
  ConversationRequest request = Request(Protocol::kResponses, true, true);
  request.echo = Json{{"instructions", "be brief"},
                      {"namespace_tool_map", Json{{"get_w", Json::array({"weather", "get"})}}}};
  StreamProcessor processor(request, "resp_1", "DeepSeek-V4-Pro", 5);
  SequentialIds(processor);
  Outcome run = Process(processor, {"r</think>ok", ToolBlock()});

  std::vector<std::string> names;
  for (std::size_t i = 0; i < run.events.size(); ++i) {
    Json data = Data(run.events[i]);
    EXPECT_EQ(data["sequence_number"], i);
    EXPECT_EQ(data["type"], run.events[i].event);
    names.push_back(run.events[i].event);
  }
  EXPECT_THAT(names,
              ElementsAre("response.created", "response.in_progress", "response.output_item.added",
                          "response.content_part.added", "response.reasoning_text.delta",
                          "response.reasoning_text.done", "response.content_part.done",
                          "response.output_item.done", "response.output_item.added",
                          "response.content_part.added", "response.output_text.delta",
                          "response.output_text.done", "response.content_part.done",
                          "response.output_item.done", "response.output_item.added",
                          "response.function_call_arguments.delta",
                          "response.function_call_arguments.delta",
                          "response.function_call_arguments.delta",
                          "response.function_call_arguments.delta",
                          "response.function_call_arguments.delta",
                          "response.function_call_arguments.delta",
                          "response.function_call_arguments.delta",
                          "response.function_call_arguments.done", "response.output_item.done",
                          "response.completed"));

  const Json& response = run.final_response;
  EXPECT_EQ(response["status"], "completed");
  EXPECT_EQ(response["instructions"], "be brief");
  ASSERT_EQ(response["output"].size(), 3u);
  EXPECT_EQ(response["output"][0]["id"], "rs_resp_1_0");
  EXPECT_EQ(response["output"][0]["encrypted_content"], "resp_1-0");
  EXPECT_EQ(response["output"][1]["phase"], "commentary");  // a call follows the answer
  EXPECT_EQ(response["output"][2]["name"], "get");
  EXPECT_EQ(response["output"][2]["namespace"], "weather");
  EXPECT_EQ(response["output"][2]["arguments"], R"({"city": "Paris"})");
  EXPECT_EQ(response["usage"].dump(),
            R"({"input_tokens":10,"input_tokens_details":{"cached_tokens":4},"output_tokens":2,)"
            R"("output_tokens_details":{"reasoning_tokens":0},"total_tokens":12})");
}

TEST(ResponsesEventsTest, LengthMakesTheResponseIncomplete) {
  ConversationRequest request = Request(Protocol::kResponses, false, false);
  StreamProcessor processor(request, "r", "m", 5);
  Outcome run = Process(processor, {"abc"}, FinishReason::kLength);
  EXPECT_EQ(run.events.back().event, "response.incomplete");
  EXPECT_EQ(run.final_response["status"], "incomplete");
  EXPECT_EQ(run.final_response["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(run.final_response["output"][0]["status"], "incomplete");
  EXPECT_EQ(StreamProcessor::SseDoneData(Protocol::kResponses), std::nullopt);
}

TEST(MessagesEventsTest, ThinkingBlockSignatureAndToolUse) {
  ConversationRequest request = Request(Protocol::kMessages, true, true);
  StreamProcessor processor(request, "msg_1", "DeepSeek-V4-Pro", 5);
  SequentialIds(processor);
  processor.SetThinkingSignature("sig");
  Outcome run = Process(processor, {"r</think>ok", ToolBlock()});

  std::vector<std::string> names;
  for (const OutputEvent& event : run.events) names.push_back(event.event);
  EXPECT_THAT(std::vector<std::string>(names.begin(), names.begin() + 3),
              ElementsAre("message_start", "content_block_start", "ping"));
  EXPECT_EQ(names.back(), "message_stop");
  Json start = Data(run.events[0]);
  EXPECT_EQ(start["message"]["usage"]["input_tokens"], 6);  // uncached part of the prompt
  EXPECT_EQ(start["message"]["usage"]["cache_read_input_tokens"], 4);

  const Json& message = run.final_response;
  ASSERT_EQ(message["content"].size(), 3u);
  EXPECT_EQ(message["content"][0].dump(), R"({"type":"thinking","thinking":"r","signature":"sig"})");
  EXPECT_EQ(message["content"][1].dump(), R"({"type":"text","text":"ok"})");
  EXPECT_EQ(message["content"][2]["input"].dump(), R"({"city":"Paris"})");
  EXPECT_EQ(message["stop_reason"], "tool_use");
}

TEST(MessagesEventsTest, StopSequenceIsReported) {
  ConversationRequest request = Request(Protocol::kMessages, false, false);
  request.parsing.stop_sequences = {"c"};
  StreamProcessor processor(request, "msg_1", "m", 5);
  Outcome run = Process(processor, {"ab", "cd"});
  EXPECT_EQ(run.final_response["content"].dump(), R"([{"type":"text","text":"ab"}])");
  EXPECT_EQ(run.final_response["stop_reason"], "stop_sequence");
  EXPECT_EQ(run.final_response["stop_sequence"], "c");
  EXPECT_EQ(run.final_response["usage"]["output_tokens"], 2);
}

}  // namespace
}  // namespace tandem::recipe
