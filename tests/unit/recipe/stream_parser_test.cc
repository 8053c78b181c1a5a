// StreamParser: the expected splits below are what deepseek-recipe 0.2.0's StreamProcessor emits
// for the same input (probed with its Python binding); the split-invariance tests need no oracle.
#include "tandem/recipe/stream_parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tandem::recipe {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const std::string kDsml = "\xEF\xBD\x9C" "DSML\xEF\xBD\x9C";  // ｜DSML｜

ParsingOptions Thinking() {
  ParsingOptions options;
  options.parse_tool_calls = false;
  options.thinking_initial_stage = ThinkingInitialStage::kReasoningStart;
  return options;
}

ParsingOptions WithTools(ParsingOptions options) {
  options.parse_tool_calls = true;
  return options;
}

struct Split {
  std::string reasoning;
  std::string content;
  std::vector<std::string> calls;      // names
  std::vector<std::string> arguments;  // one JSON text per call
};

Split Collect(const std::vector<ParsedEvent>& events) {
  Split split;
  for (const ParsedEvent& event : events) {
    switch (event.kind) {
      case ParsedKind::kReasoning: split.reasoning += event.text; break;
      case ParsedKind::kContent: split.content += event.text; break;
      case ParsedKind::kToolBlockStart: break;
      case ParsedKind::kToolCallStart:
        split.calls.push_back(event.text);
        split.arguments.emplace_back();
        break;
      case ParsedKind::kToolArguments: split.arguments.back() += event.text; break;
    }
  }
  return split;
}

std::vector<ParsedEvent> Parse(const ParsingOptions& options,
                               const std::vector<std::string>& pieces) {
  StreamParser parser(options);
  std::vector<ParsedEvent> events;
  for (const std::string& piece : pieces) parser.Push(piece, events);
  parser.Finish(events);
  return events;
}

std::vector<std::string> Texts(const std::vector<ParsedEvent>& events, ParsedKind kind) {
  std::vector<std::string> texts;
  for (const ParsedEvent& event : events) {
    if (event.kind == kind) texts.push_back(event.text);
  }
  return texts;
}

std::string V4Block() {
  return "\n\n<" + kDsml + "tool_calls>\n<" + kDsml + "invoke name=\"get_w\">\n<" + kDsml +
         "parameter name=\"city\" string=\"true\">P \"x\"\n</" + kDsml + "parameter>\n<" + kDsml +
         "parameter name=\"n\" string=\"false\">3</" + kDsml + "parameter>\n</" + kDsml +
         "invoke>\n</" + kDsml + "tool_calls>";
}

std::string V41Block() {
  return "\n\n<" + kDsml + " calls>\n<" + kDsml + " invoke name=\"get_w\">\n<" + kDsml +
         " parameter name=\"city\" string=\"true\">P \"x\"\n</" + kDsml + " parameter>\n<" + kDsml +
         " parameter name=\"n\" string=\"false\">3</" + kDsml + " parameter>\n</" + kDsml +
         " invoke>\n</" + kDsml + " calls>";
}

TEST(StreamParserTest, ReasoningThenContentDropsTheNewlinesAroundTheTag) {
  Split split = Collect(Parse(Thinking(), {"\n\nab\n\n</think>\n\ncd\n"}));
  EXPECT_EQ(split.reasoning, "ab");
  EXPECT_EQ(split.content, "cd\n");
}

TEST(StreamParserTest, ContinuationStagesKeepLeadingNewlines) {
  ParsingOptions options = Thinking();
  options.thinking_initial_stage = ThinkingInitialStage::kReasoningContinuation;
  EXPECT_EQ(Collect(Parse(options, {"\nab</think>cd"})).reasoning, "\nab");
  options.thinking_initial_stage = ThinkingInitialStage::kContentContinuation;
  Split split = Collect(Parse(options, {"\nab</think>cd"}));
  EXPECT_EQ(split.reasoning, "");
  EXPECT_EQ(split.content, "\nabcd");
}

TEST(StreamParserTest, StrayThinkEndInTheAnswerIsDroppedAndSplitsTheEvent) {
  std::vector<ParsedEvent> events = Parse(Thinking(), {"re</think>ab\n\n</think>\n\ncd"});
  EXPECT_THAT(Texts(events, ParsedKind::kContent), ElementsAre("ab\n\n", "\n\ncd"));
}

TEST(StreamParserTest, HeldTextIsReleasedPieceByPiece) {
  // "ab\n" may end with the newlines of </think>: held whole, then released as its own event.
  std::vector<ParsedEvent> events = Parse(Thinking(), {"ab\n", "\nc", "d"});
  EXPECT_THAT(Texts(events, ParsedKind::kReasoning), ElementsAre("ab\n", "\nc", "d"));
}

TEST(StreamParserTest, AByteThatBreaksACandidateDoesNotOpenANewlineRun) {
  // The oracle does not backtrack: the "\n" that breaks "</thin" stays text.
  Split split = Collect(Parse(Thinking(), {"x</thin\n\n</think>y"}));
  EXPECT_EQ(split.reasoning, "x</thin\n");
  EXPECT_EQ(split.content, "y");
}

TEST(StreamParserTest, ParsesBothDsmlSpellings) {
  for (const std::string& block : {V4Block(), V41Block()}) {
    Split split = Collect(Parse(WithTools(Thinking()), {"r</think>ok" + block + "dropped"}));
    EXPECT_EQ(split.reasoning, "r");
    EXPECT_EQ(split.content, "ok");
    EXPECT_THAT(split.calls, ElementsAre("get_w"));
    EXPECT_THAT(split.arguments, ElementsAre("{\"city\": \"P \\\"x\\\"\\n\", \"n\": 3}"));
  }
}

TEST(StreamParserTest, ToolBlockMayOpenInsideReasoning) {
  Split split = Collect(Parse(WithTools(Thinking()), {"thinking" + V4Block()}));
  EXPECT_EQ(split.reasoning, "thinking");
  EXPECT_EQ(split.content, "");
  EXPECT_THAT(split.calls, ElementsAre("get_w"));
}

TEST(StreamParserTest, WithoutToolParsingMarkupIsText) {
  Split split = Collect(Parse(Thinking(), {"x</think>a" + V4Block()}));
  EXPECT_EQ(split.content, "a" + V4Block());
  EXPECT_THAT(split.calls, IsEmpty());
}

TEST(StreamParserTest, StartsInsideTheToolBlock) {
  ParsingOptions options;
  options.starts_in_tool_calls = true;
  std::string text = "\n<" + kDsml + "invoke name=\"f\">\n</" + kDsml + "invoke>\n</" + kDsml +
                     "tool_calls>";
  Split split = Collect(Parse(options, {text}));
  EXPECT_THAT(split.calls, ElementsAre("f"));
  EXPECT_THAT(split.arguments, ElementsAre("{}"));
}

TEST(StreamParserTest, KeyStreamsRawAndValueEscapesPerPiece) {
  std::string open = "</think>\n\n<" + kDsml + "tool_calls>\n<" + kDsml + "invoke name=\"f\">\n<" +
                     kDsml + "parameter name=";
  std::vector<ParsedEvent> events =
      Parse(WithTools(Thinking()), {open + "\"ci", "ty\" string=\"true\">a\t", "b</" + kDsml, "x>"});
  EXPECT_THAT(Texts(events, ParsedKind::kToolArguments),
              ElementsAre("{", "\"ci", "ty\"", ": ", "\"", "a\\t", "b", "\""));
}

TEST(StreamParserTest, StopSequenceEndsTheAnswerButNotReasoning) {
  ParsingOptions options = Thinking();
  options.stop_sequences = {"STOP"};
  StreamParser parser(options);
  std::vector<ParsedEvent> events;
  parser.Push("a STOP b</think>cd STOP ef", events);
  EXPECT_TRUE(parser.stopped());
  EXPECT_EQ(parser.matched_stop(), "STOP");
  parser.Push("more", events);
  parser.Finish(events);
  Split split = Collect(events);
  EXPECT_EQ(split.reasoning, "a STOP b");
  EXPECT_EQ(split.content, "cd ");
}

TEST(StreamParserTest, EarliestStopSequenceWins) {
  ParsingOptions options;
  options.stop_sequences = {"STOP", "cd S"};
  EXPECT_EQ(Collect(Parse(options, {"ab cd STOP"})).content, "ab ");
}

TEST(StreamParserTest, PartialStopSequenceIsReleasedAtTheEnd) {
  ParsingOptions options;
  options.stop_sequences = {"STOP"};
  std::vector<ParsedEvent> events = Parse(options, {"cd ", "S", "T"});
  EXPECT_THAT(Texts(events, ParsedKind::kContent), ElementsAre("cd ", "S", "T"));
}

TEST(StreamParserTest, JsonModeBlanksTextAroundAFencedValue) {
  ParsingOptions options;
  options.parse_json_output = true;
  std::vector<ParsedEvent> events =
      Parse(options, {"Sure:\n```json\n{\"a\": \"}\", \"b\": [1]}\n```\nbye"});
  EXPECT_THAT(Texts(events, ParsedKind::kContent),
              ElementsAre(" ", "{\"a\": \"}\", \"b\": [1]}", " "));
}

TEST(StreamParserTest, JsonModeBareValueKeepsTheRest) {
  ParsingOptions options;
  options.parse_json_output = true;
  EXPECT_THAT(Texts(Parse(options, {"x [1, 2] y"}), ParsedKind::kContent),
              ElementsAre(" ", "[", "1, 2] y"));
}

TEST(StreamParserTest, NeverEmitsHalfACharacter) {
  ParsingOptions options;
  const std::string text = "日本";  // two 3-byte characters
  std::vector<ParsedEvent> events =
      Parse(options, {text.substr(0, 1), text.substr(1, 3), text.substr(4)});
  EXPECT_THAT(Texts(events, ParsedKind::kContent), ElementsAre("日", "本"));
}

// Every tag split at every byte offset parses as unsplit (same text per kind).
TEST(StreamParserTest, EverySplitPointParsesAsUnsplit) {
  ParsingOptions options = WithTools(Thinking());
  options.stop_sequences = {"STOP"};
  const std::vector<std::string> texts = {
      "\n\nlet me think\n\n</think>\n\nHello" + V4Block() + "tail",
      "reason</think>answer STOP after",
      "r</think>a</think>b" + V41Block(),
      "reasoning only" + V41Block(),
  };
  for (const std::string& text : texts) {
    const Split whole = Collect(Parse(options, {text}));
    for (std::size_t cut = 1; cut < text.size(); ++cut) {
      for (std::size_t cut2 = cut; cut2 < std::min(text.size(), cut + 4); ++cut2) {
        Split split = Collect(Parse(options, {text.substr(0, cut), text.substr(cut, cut2 - cut),
                                              text.substr(cut2)}));
        ASSERT_EQ(split.reasoning, whole.reasoning) << text << " cut at " << cut << "," << cut2;
        ASSERT_EQ(split.content, whole.content) << text << " cut at " << cut << "," << cut2;
        ASSERT_EQ(split.calls, whole.calls) << text << " cut at " << cut << "," << cut2;
        ASSERT_EQ(split.arguments, whole.arguments) << text << " cut at " << cut << "," << cut2;
      }
    }
  }
}

TEST(StreamParserTest, ByteByBytePushesParseAsUnsplit) {
  ParsingOptions options = WithTools(Thinking());
  const std::string text = "\nthink\n</think>\nanswer" + V4Block();
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  Split whole = Collect(Parse(options, {text}));
  Split split = Collect(Parse(options, bytes));
  EXPECT_EQ(split.reasoning, whole.reasoning);
  EXPECT_EQ(split.content, whole.content);
  EXPECT_EQ(split.arguments, whole.arguments);
  EXPECT_EQ(whole.content, "answer");
}

}  // namespace
}  // namespace tandem::recipe
