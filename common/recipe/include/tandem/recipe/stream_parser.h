#pragma once

// The streaming output parser: generated text, pushed in arbitrary pieces, becomes reasoning,
// answer content and DSML tool calls, exactly as deepseek-recipe's stream parser splits it.
//
// It is a byte-level state machine. Each text stage looks for an ordered set of tags; text that
// could still be the start of a tag is held back, so a tag split at any byte across pushes parses
// as if unsplit. Emitted text keeps the granularity of the pushes: text released from a held piece
// is reported as that piece, never merged with the next one (the oracle streams it that way, and
// the differential test compares every event).
//
//   StreamParser parser(request.parsing);
//   std::vector<ParsedEvent> events;
//   parser.Push("Let me think</th", events);   // "Let me think" may still be held
//   parser.Push("ink>Hello", events);
//   parser.Finish(events);

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "tandem/recipe/conversation.h"

namespace tandem::recipe {

enum class ParsedKind {
  kReasoning,       // text: reasoning delta
  kContent,         // text: answer delta
  kToolCallStart,   // text: the function name; a new call with the next index
  kToolArguments,   // text: a piece of the current call's JSON arguments
};

struct ParsedEvent {
  ParsedKind kind;
  std::string text;
};

class StreamParser {
 public:
  explicit StreamParser(const ParsingOptions& options);

  // Appends the events `piece` completes. After a stop sequence matched, pushes are ignored.
  void Push(absl::string_view piece, std::vector<ParsedEvent>& out);
  // End of output: releases held-back text.
  void Finish(std::vector<ParsedEvent>& out);

  // A stop sequence ended the answer; nothing after it is output.
  bool stopped() const { return matched_stop_.has_value(); }
  const std::optional<std::string>& matched_stop() const { return matched_stop_; }
  int tool_call_count() const { return tool_calls_; }
  bool in_reasoning() const { return state_ == State::kReasoning; }

 private:
  enum class State {
    kReasoning,
    kContent,
    kJsonBefore,      // JSON-object mode: text before the JSON value
    kJsonValue,       // JSON-object mode: inside the JSON value
    kJsonAfter,       // JSON-object mode: text after the JSON value
    kBlockOpen,       // after "<｜DSML｜": "tool_calls>" or " calls>"
    kBetweenInvokes,  // an invoke or the end of the block
    kInvokeName,      // name="..."
    kInvokeNameEnd,   // ">"
    kInvokeBody,      // a parameter or the end of the invoke
    kParamKey,        // "..." streamed as the JSON key
    kParamKeyEnd,     // " string=" then "true"/"false" and ">"
    kParamValue,      // value text up to "</｜DSML｜"
    kCloseTag,        // the rest of a closing tag, up to ">"
    kDone,            // after the block or on malformed markup: output is dropped
  };

  struct Match {
    std::size_t start = 0;
    std::size_t end = 0;
    int which = -1;
  };

  // Processes buffered text as far as it is decided.
  void Process(std::vector<ParsedEvent>& out, bool at_end);
  // Text states: returns false when waiting for more input.
  bool StepText(std::size_t& pos, std::vector<ParsedEvent>& out, bool at_end);
  // Literal states: returns false when waiting for more input.
  bool StepMarkup(std::size_t& pos, std::vector<ParsedEvent>& out);
  std::optional<Match> FindComplete(std::size_t pos) const;
  std::optional<std::size_t> FindPartial(std::size_t pos) const;
  void OnMatch(const Match& match, std::vector<ParsedEvent>& out);
  // Emits buf_[from, to) as text of the current state, one event per originating piece.
  void EmitText(std::size_t from, std::size_t to, std::vector<ParsedEvent>& out);
  void EmitPieceText(ParsedKind kind, absl::string_view text, std::size_t piece,
                     std::vector<ParsedEvent>& out);
  void EmitMarkup(ParsedKind kind, std::string text, std::vector<ParsedEvent>& out);
  void EmitKeyPart(std::string text, std::vector<ParsedEvent>& out);
  std::size_t PieceAt(std::size_t offset) const;
  void EnterState(State state);

  ParsingOptions options_;
  State state_;
  std::string buf_;                     // undecided input
  std::vector<std::size_t> piece_ends_;  // ends of the pushed pieces inside buf_
  std::uint64_t first_piece_id_ = 0;    // id of the piece that starts buf_
  std::uint64_t next_piece_id_ = 0;
  std::string utf8_tail_;               // incomplete UTF-8 sequence from the last push
  bool strip_newlines_ = false;         // drop leading newlines of the current text
  // The piece the last decided byte came from; key parts of one piece form one event.
  std::uint64_t last_piece_ = UINT64_MAX;
  std::uint64_t key_piece_ = UINT64_MAX;
  std::size_t key_event_ = SIZE_MAX;
  bool key_opened_ = false;
  bool key_space_seen_ = false;
  std::string invoke_name_;
  bool invoke_has_params_ = false;
  bool value_is_string_ = false;
  State after_close_tag_ = State::kDone;
  int tool_calls_ = 0;
  std::optional<std::string> matched_stop_;
  // JSON-object mode scanner.
  int json_depth_ = 0;
  bool json_in_string_ = false;
  bool json_escape_ = false;
};

}  // namespace tandem::recipe
