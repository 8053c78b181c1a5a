#pragma once

// The streaming output parser: generated text, pushed in arbitrary pieces, becomes reasoning,
// answer content and DSML tool calls, exactly as deepseek-recipe's stream parser splits it.
//
// It is a byte-level state machine. Each text stage looks for its tags with one byte matcher per
// tag; text that could still be the start of a tag is held back, so a tag split at any byte across
// pushes parses as if unsplit. Emitted text keeps the granularity of the pushes: text released
// from a held piece is reported as that piece, never merged with the next one (the oracle streams
// it that way, and the differential test compares every event). Stop sequences are a second layer
// over the answer text only, so reasoning and tool markup never stop the output.
//
//   StreamParser parser(request.parsing);
//   std::vector<ParsedEvent> events;
//   parser.Push("Let me think</th", events);   // held: it may end with a tag
//   parser.Push("ink>Hello", events);          // reasoning "Let me think", content "Hello"
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
  kToolBlockStart,  // the tool-call block began: the answer text is over
  kToolCallStart,   // text: the function name; a new call with the next index
  kToolArguments,   // text: a piece of the current call's JSON arguments
};

struct ParsedEvent {
  ParsedKind kind;
  std::string text;
  // Reasoning text: the pushed piece (0 for the first non-empty push) it came from.
  std::uint64_t piece = 0;
};

// Finds tags in text that arrives piece by piece. Every tag has its own matcher and none
// backtracks: the byte that breaks a candidate is re-examined only as the first byte of that tag
// (never as the start of its newline run), which is how the oracle scans.
class TagScanner {
 public:
  struct Tag {
    int id;
    bool leading_newlines;  // a run of newlines before the literal belongs to the tag
    std::string literal;
    std::size_t min_newlines;  // the run must be at least this long
  };
  struct Found {
    std::size_t start;
    std::size_t end;
    int id;
  };

  void Reset(const std::vector<Tag>* tags);
  // Scans the new bytes of text[from..]; stops at the first completed tag.
  std::optional<Found> Scan(absl::string_view text, std::size_t from);
  // Where the earliest unfinished candidate starts (SIZE_MAX when none).
  std::size_t EarliestCandidate() const;
  // The text was cut back to `size` bytes.
  void Truncate(std::size_t size);
  // `count` bytes were dropped from the front of the scanned text.
  void Shift(std::size_t count);

 private:
  struct Candidate {
    std::size_t start = SIZE_MAX;
    bool literal_only = false;
  };
  const std::vector<Tag>* tags_ = nullptr;
  std::vector<Candidate> candidates_;
  std::size_t next_ = 0;
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
  // Non-empty pushes so far; the next one becomes piece number pieces().
  std::uint64_t pieces() const { return pieces_; }

 private:
  enum class State {
    kReasoning,
    kContent,
    kJsonBefore,      // JSON-object mode: text before the JSON value (blanked)
    kJsonValue,       // JSON-object mode: after a bare value's first bracket (the rest is answer)
    kJsonFenced,      // JSON-object mode: inside a ```json fence
    kJsonAfter,       // JSON-object mode: text after the fenced value (blanked)
    kBetweenInvokes,  // skipped text up to an invoke or the end of the block
    kInvokeName,      // "name", then the rest of the tag
    kInvokeBody,      // skipped text up to a parameter or the end of the invoke
    kParamKey,        // raw text up to a space, streamed as the JSON key
    kParamKeyEnd,     // skipped text up to "true"> or "false">
    kParamValue,      // value text up to "</｜DSML｜"
    kDone,            // after the tool-call block: the rest of the output is dropped
    kStateCount,
  };

  // Pieces of pending text: the bytes and where each pushed piece ends.
  struct PieceBuffer {
    std::string text;
    std::vector<std::size_t> ends;
    std::uint64_t first_id = 0;  // id of the piece that starts `text`
    void Append(absl::string_view piece);
    std::size_t PieceAt(std::size_t offset) const;
    // Drops text[0, count) and the pieces that ended inside it.
    void Drop(std::size_t count);
  };

  void BuildTags();
  void Process(std::vector<ParsedEvent>& out, bool at_end);
  // Text states: returns false when waiting for more input.
  bool StepText(std::size_t& pos, std::vector<ParsedEvent>& out, bool at_end);
  // Markup states: returns false when waiting for more input.
  bool StepMarkup(std::size_t& pos, std::vector<ParsedEvent>& out);
  void OnTag(int id, std::vector<ParsedEvent>& out);
  // Emits buf_.text[from, to) as text of the current state, one event per originating piece.
  void EmitText(std::size_t from, std::size_t to, std::vector<ParsedEvent>& out);
  void EmitPiece(absl::string_view text, std::vector<ParsedEvent>& out);
  void Emit(ParsedKind kind, std::string text, std::vector<ParsedEvent>& out);
  // The stop-sequence layer over answer text: bytes are decided (scanned for stop sequences)
  // before their piece is released (emitted).
  bool StopsApply() const;
  void Decide(std::size_t from, std::size_t to, std::vector<ParsedEvent>& out);
  void DecideSegment(absl::string_view text, std::uint64_t piece, std::vector<ParsedEvent>& out);
  // Emits held answer segments of pieces before `piece_limit` that no stop sequence may claim.
  void ReleaseStops(std::uint64_t piece_limit, std::vector<ParsedEvent>& out);
  void FlushStopFilter(std::vector<ParsedEvent>& out);
  // Answer bytes from buf_ offset `buf_offset` on were a tag's: they are not output.
  void HideStops(std::size_t buf_offset);
  // Emits the first `count` held segments, cut at stop_text_ offset `limit`; returns the end.
  std::size_t EmitSegments(std::size_t count, std::size_t limit, std::vector<ParsedEvent>& out);
  void EnterState(State state);

  ParsingOptions options_;
  State state_;
  std::vector<TagScanner::Tag> tags_[static_cast<int>(State::kStateCount)];
  std::vector<TagScanner::Tag> stop_tags_;
  TagScanner scanner_;
  PieceBuffer buf_;             // undecided input
  std::size_t decided_ = 0;      // buf_ bytes up to here were handed to the stop layer
  struct Segment {
    std::size_t end;      // in stop_text_
    std::uint64_t piece;  // the pushed piece it came from
    bool hidden;          // a tag's bytes: seen by the stop matcher, never output
  };
  TagScanner stop_scanner_;
  std::string stop_text_;       // answer text held by the stop layer
  std::vector<Segment> stop_segments_;
  bool segment_break_ = true;   // a tag came since the last decided answer byte
  // Runs of buf_ bytes handed to the stop layer and where they start in stop_text_, as
  // absolute offsets (bytes dropped from the front of buf_ / stop_text_ count on).
  std::size_t buf_base_ = 0;
  std::size_t stop_base_ = 0;
  struct Fed {
    std::size_t buf_start;
    std::size_t buf_end;
    std::size_t stop_start;
  };
  std::vector<Fed> fed_;
  std::string utf8_tail_;       // incomplete UTF-8 sequence from the last push
  bool strip_newlines_ = false;  // drop leading newlines of the current text
  bool invoke_has_params_ = false;
  bool value_is_string_ = false;
  int tool_calls_ = 0;
  std::uint64_t pieces_ = 0;
  std::optional<std::string> matched_stop_;
};

}  // namespace tandem::recipe
