#include "tandem/recipe/stream_parser.h"

#include <algorithm>
#include <array>
#include <utility>

namespace tandem::recipe {
namespace {

// Model-format spellings (FULLWIDTH VERTICAL LINE U+FF5C around DSML).
constexpr absl::string_view kThinkEnd = "</think>";
constexpr absl::string_view kDsmlOpen = "<\xEF\xBD\x9C" "DSML\xEF\xBD\x9C";
constexpr absl::string_view kDsmlClose = "</\xEF\xBD\x9C" "DSML\xEF\xBD\x9C";
constexpr absl::string_view kFenceOpen = "```json";
constexpr absl::string_view kFence = "```";

// A tag that may be preceded by a run of newlines belonging to it.
struct Pattern {
  bool leading_newlines;
  absl::string_view literal;
};

// Pattern ids inside a text state; stop sequences follow at kStopBase + index.
enum PatternId : int {
  kPatThinkEnd = 0,
  kPatToolBlock = 1,
  kPatValueEnd = 2,
  kPatKeyEnd = 3,
  kPatJsonFence = 4,
  kPatJsonObject = 5,
  kPatJsonArray = 6,
  kPatFenceClose = 7,
  kStopBase = 16,
};

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// Length of the longest prefix of `text` that is a whole UTF-8 sequence run.
std::size_t CompleteUtf8Prefix(absl::string_view text) {
  std::size_t n = text.size();
  // Look back at most 3 bytes for the lead byte of an unfinished sequence.
  for (std::size_t back = 1; back <= 3 && back <= n; ++back) {
    unsigned char c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    std::size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return need > back ? n - back : n;
  }
  return n;
}

void AppendJsonEscaped(absl::string_view text, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xF];
        } else {
          out += ch;
        }
    }
  }
}

// Where `text` (from `pos`) matches `pattern`: the end offset, or npos.
std::size_t MatchAt(absl::string_view text, std::size_t pos, const Pattern& pattern) {
  std::size_t i = pos;
  if (pattern.leading_newlines) {
    while (i < text.size() && text[i] == '\n') ++i;
  }
  if (text.substr(i, pattern.literal.size()) == pattern.literal) return i + pattern.literal.size();
  return absl::string_view::npos;
}

// Whether text[pos..] is a proper prefix of a match of `pattern` (more input could complete it).
bool PartialAt(absl::string_view text, std::size_t pos, const Pattern& pattern) {
  std::size_t i = pos;
  if (pattern.leading_newlines) {
    while (i < text.size() && text[i] == '\n') ++i;
    if (i == text.size()) return true;
  }
  absl::string_view rest = text.substr(i);
  return rest.size() < pattern.literal.size() && pattern.literal.substr(0, rest.size()) == rest;
}

}  // namespace

StreamParser::StreamParser(const ParsingOptions& options) : options_(options) {
  if (options_.starts_in_tool_calls && options_.parse_tool_calls) {
    state_ = State::kBetweenInvokes;
  } else if (options_.thinking_initial_stage.has_value() &&
             *options_.thinking_initial_stage != ThinkingInitialStage::kContentContinuation) {
    state_ = State::kReasoning;
    strip_newlines_ = *options_.thinking_initial_stage == ThinkingInitialStage::kReasoningStart;
  } else {
    EnterState(options_.parse_json_output ? State::kJsonBefore : State::kContent);
    // Outside thinking mode a new answer starts fresh; a continued one keeps its newlines.
    strip_newlines_ = !options_.thinking_initial_stage.has_value();
  }
}

void StreamParser::EnterState(State state) { state_ = state; }

void StreamParser::Push(absl::string_view piece, std::vector<ParsedEvent>& out) {
  if (stopped() || state_ == State::kDone) return;
  std::string text = std::move(utf8_tail_);
  utf8_tail_.clear();
  text.append(piece.data(), piece.size());
  std::size_t whole = CompleteUtf8Prefix(text);
  utf8_tail_ = text.substr(whole);
  text.resize(whole);
  if (text.empty()) return;
  buf_ += text;
  piece_ends_.push_back(buf_.size());
  ++next_piece_id_;
  Process(out, /*at_end=*/false);
}

void StreamParser::Finish(std::vector<ParsedEvent>& out) {
  if (stopped() || state_ == State::kDone) return;
  // An unfinished UTF-8 sequence at the very end cannot become a character any more.
  utf8_tail_.clear();
  Process(out, /*at_end=*/true);
}

std::size_t StreamParser::PieceAt(std::size_t offset) const {
  auto it = std::upper_bound(piece_ends_.begin(), piece_ends_.end(), offset);
  return static_cast<std::size_t>(it - piece_ends_.begin());
}

void StreamParser::Process(std::vector<ParsedEvent>& out, bool at_end) {
  std::size_t pos = 0;
  while (pos < buf_.size() && !stopped() && state_ != State::kDone) {
    bool progressed;
    switch (state_) {
      case State::kReasoning:
      case State::kContent:
      case State::kJsonBefore:
      case State::kJsonValue:
      case State::kJsonAfter:
      case State::kParamValue:
        progressed = StepText(pos, out, at_end);
        break;
      case State::kParamKey:
        progressed = key_opened_ ? StepText(pos, out, at_end) : StepMarkup(pos, out);
        break;
      default:
        progressed = StepMarkup(pos, out);
        break;
    }
    if (!progressed) break;
  }
  if (stopped() || state_ == State::kDone || at_end) pos = buf_.size();
  // Drop what was decided; keep piece boundaries of the rest.
  std::size_t dropped_pieces = 0;
  while (dropped_pieces < piece_ends_.size() && piece_ends_[dropped_pieces] <= pos) ++dropped_pieces;
  piece_ends_.erase(piece_ends_.begin(), piece_ends_.begin() + dropped_pieces);
  for (std::size_t& end : piece_ends_) end -= pos;
  first_piece_id_ += dropped_pieces;
  buf_.erase(0, pos);
}

std::optional<StreamParser::Match> StreamParser::FindComplete(std::size_t pos) const {
  absl::string_view text(buf_);
  std::optional<Match> best;
  auto consider = [&](int which, const Pattern& pattern) {
    for (std::size_t i = pos; i < text.size(); ++i) {
      if (best && i >= best->start) return;
      std::size_t end = MatchAt(text, i, pattern);
      if (end != absl::string_view::npos) {
        best = Match{i, end, which};
        return;
      }
    }
  };
  auto consider_stops = [&] {
    for (std::size_t s = 0; s < options_.stop_sequences.size(); ++s) {
      if (options_.stop_sequences[s].empty()) continue;
      consider(kStopBase + static_cast<int>(s), Pattern{false, options_.stop_sequences[s]});
    }
  };
  switch (state_) {
    case State::kReasoning:
      consider(kPatThinkEnd, Pattern{true, kThinkEnd});
      if (options_.parse_tool_calls) consider(kPatToolBlock, Pattern{true, kDsmlOpen});
      break;
    case State::kContent:
      consider(kPatThinkEnd, Pattern{false, kThinkEnd});
      if (options_.parse_tool_calls) consider(kPatToolBlock, Pattern{true, kDsmlOpen});
      consider_stops();
      break;
    case State::kJsonBefore:
      consider(kPatJsonFence, Pattern{false, kFenceOpen});
      consider(kPatJsonObject, Pattern{false, "{"});
      consider(kPatJsonArray, Pattern{false, "["});
      break;
    case State::kJsonValue:
      if (json_depth_ < 0) consider(kPatFenceClose, Pattern{true, kFence});
      consider_stops();
      break;
    case State::kJsonAfter:
      break;
    case State::kParamKey:
      consider(kPatKeyEnd, Pattern{false, "\""});
      break;
    case State::kParamValue:
      consider(kPatValueEnd, Pattern{false, kDsmlClose});
      break;
    default:
      break;
  }
  return best;
}

std::optional<std::size_t> StreamParser::FindPartial(std::size_t pos) const {
  absl::string_view text(buf_);
  std::vector<Pattern> patterns;
  switch (state_) {
    case State::kReasoning:
      patterns.push_back({true, kThinkEnd});
      if (options_.parse_tool_calls) patterns.push_back({true, kDsmlOpen});
      break;
    case State::kContent:
      patterns.push_back({false, kThinkEnd});
      if (options_.parse_tool_calls) patterns.push_back({true, kDsmlOpen});
      break;
    case State::kJsonBefore:
      patterns.push_back({false, kFenceOpen});
      break;
    case State::kJsonValue:
      if (json_depth_ < 0) patterns.push_back({true, kFence});
      break;
    case State::kParamValue:
      patterns.push_back({false, kDsmlClose});
      break;
    default:
      break;
  }
  if (state_ == State::kContent || state_ == State::kJsonValue) {
    for (const std::string& stop : options_.stop_sequences) {
      if (!stop.empty()) patterns.push_back({false, stop});
    }
  }
  for (std::size_t i = pos; i < text.size(); ++i) {
    for (const Pattern& pattern : patterns) {
      if (PartialAt(text, i, pattern)) return i;
    }
  }
  return std::nullopt;
}

bool StreamParser::StepText(std::size_t& pos, std::vector<ParsedEvent>& out, bool at_end) {
  if (std::optional<Match> match = FindComplete(pos)) {
    EmitText(pos, match->start, out);
    pos = match->end;
    last_piece_ = first_piece_id_ + PieceAt(match->end - 1);
    OnMatch(*match, out);
    return true;
  }
  std::size_t release = buf_.size();
  if (!at_end) {
    if (std::optional<std::size_t> partial = FindPartial(pos)) {
      // The piece holding the partial tag is held whole; earlier pieces are decided.
      std::size_t piece = PieceAt(*partial);
      release = piece == 0 ? 0 : piece_ends_[piece - 1];
      release = std::max(release, pos);
    }
  }
  EmitText(pos, release, out);
  pos = release;
  return false;
}

void StreamParser::OnMatch(const Match& match, std::vector<ParsedEvent>& out) {
  if (match.which >= kStopBase) {
    matched_stop_ = options_.stop_sequences[match.which - kStopBase];
    return;
  }
  switch (match.which) {
    case kPatThinkEnd:
      if (state_ == State::kReasoning) {
        EnterState(options_.parse_json_output ? State::kJsonBefore : State::kContent);
        strip_newlines_ = true;
      } else {
      }
      break;
    case kPatToolBlock:
      EnterState(State::kBlockOpen);
      break;
    case kPatKeyEnd:
      EmitKeyPart("\"", out);
      EnterState(State::kParamKeyEnd);
      key_space_seen_ = false;
      break;
    case kPatValueEnd:
      if (value_is_string_) EmitMarkup(ParsedKind::kToolArguments, "\"", out);
      after_close_tag_ = State::kInvokeBody;
      EnterState(State::kCloseTag);
      break;
    case kPatJsonFence:
      EnterState(State::kJsonValue);
      json_depth_ = -1;  // fenced: the value ends at the closing fence
      strip_newlines_ = true;
      break;
    case kPatJsonObject:
    case kPatJsonArray:
      EnterState(State::kJsonValue);
      json_depth_ = 0;  // bare: the rest is the answer
      EmitMarkup(ParsedKind::kContent, match.which == kPatJsonObject ? "{" : "[", out);
      break;
    case kPatFenceClose:
      EnterState(State::kJsonAfter);
      break;
    default:
      break;
  }
}

bool StreamParser::StepMarkup(std::size_t& pos, std::vector<ParsedEvent>& out) {
  absl::string_view text(buf_);
  auto skip_space = [&] {
    while (pos < text.size() && IsSpace(text[pos])) ++pos;
    return pos < text.size();
  };
  // Matches one of `literals` at pos: its index, -1 when more input is needed, -2 on mismatch.
  auto expect = [&](std::initializer_list<absl::string_view> literals) -> int {
    absl::string_view rest = text.substr(pos);
    int index = 0;
    bool partial = false;
    for (absl::string_view literal : literals) {
      if (rest.substr(0, literal.size()) == literal) {
        pos += literal.size();
        last_piece_ = first_piece_id_ + PieceAt(pos - 1);
        return index;
      }
      if (rest.size() < literal.size() && literal.substr(0, rest.size()) == rest) partial = true;
      ++index;
    }
    return partial ? -1 : -2;
  };
  static const std::string kInvoke = std::string(kDsmlOpen) + "invoke name=";
  static const std::string kInvokeSpaced = std::string(kDsmlOpen) + " invoke name=";
  static const std::string kParam = std::string(kDsmlOpen) + "parameter name=";
  static const std::string kParamSpaced = std::string(kDsmlOpen) + " parameter name=";
  static const std::string kClose = std::string(kDsmlClose);

  int got;
  switch (state_) {
    case State::kBlockOpen:
      got = expect({"tool_calls>", " calls>"});
      if (got < 0) break;
      EnterState(State::kBetweenInvokes);
      return true;
    case State::kBetweenInvokes:
      if (!skip_space()) return false;
      got = expect({kInvoke, kInvokeSpaced, kClose});
      if (got < 0) break;
      if (got == 2) {
        after_close_tag_ = State::kDone;
        EnterState(State::kCloseTag);
      } else {
        EnterState(State::kInvokeName);
        invoke_name_.clear();
      }
      return true;
    case State::kInvokeName: {
      if (invoke_name_.empty() && text[pos] != '"') {
        got = -2;
        break;
      }
      std::size_t close = text.find('"', pos + 1);
      if (close == absl::string_view::npos) return false;
      invoke_name_ = std::string(text.substr(pos + 1, close - pos - 1));
      pos = close + 1;
      last_piece_ = first_piece_id_ + PieceAt(pos - 1);
      ++tool_calls_;
      invoke_has_params_ = false;
      EmitMarkup(ParsedKind::kToolCallStart, invoke_name_, out);
      EnterState(State::kInvokeNameEnd);
      return true;
    }
    case State::kInvokeNameEnd:
      got = expect({">"});
      if (got < 0) break;
      EnterState(State::kInvokeBody);
      return true;
    case State::kInvokeBody:
      if (!skip_space()) return false;
      got = expect({kParam, kParamSpaced, kClose});
      if (got < 0) break;
      if (got == 2) {
        EmitMarkup(ParsedKind::kToolArguments, invoke_has_params_ ? "}" : "{}", out);
        after_close_tag_ = State::kBetweenInvokes;
        EnterState(State::kCloseTag);
      } else {
        EmitMarkup(ParsedKind::kToolArguments, invoke_has_params_ ? ", " : "{", out);
        invoke_has_params_ = true;
        EnterState(State::kParamKey);
        key_opened_ = false;
      }
      return true;
    case State::kParamKey:  // only before the opening quote; the key itself is text
      got = expect({"\""});
      if (got < 0) break;
      key_opened_ = true;
      EmitKeyPart("\"", out);
      return true;
    case State::kParamKeyEnd:
      if (!key_space_seen_) {
        got = expect({" "});
        if (got < 0) break;
        key_space_seen_ = true;
        EmitMarkup(ParsedKind::kToolArguments, ": ", out);
        return true;
      }
      got = expect({"string=\"true\">", "string=\"false\">"});
      if (got < 0) break;
      key_space_seen_ = false;
      value_is_string_ = got == 0;
      EnterState(State::kParamValue);
      if (value_is_string_) EmitMarkup(ParsedKind::kToolArguments, "\"", out);
      return true;
    case State::kCloseTag: {
      std::size_t close = text.find('>', pos);
      if (close == absl::string_view::npos) return false;
      pos = close + 1;
      EnterState(after_close_tag_);
      return true;
    }
    default:
      return false;
  }
  if (got == -1) return false;
  EnterState(State::kDone);
  return false;
}

void StreamParser::EmitText(std::size_t from, std::size_t to, std::vector<ParsedEvent>& out) {
  if (from >= to) return;
  ParsedKind kind;
  switch (state_) {
    case State::kReasoning: kind = ParsedKind::kReasoning; break;
    case State::kParamKey:
    case State::kParamValue: kind = ParsedKind::kToolArguments; break;
    default: kind = ParsedKind::kContent; break;
  }
  std::size_t start = from;
  while (start < to) {
    std::size_t piece = PieceAt(start);
    std::size_t end = std::min(to, piece_ends_[piece]);
    EmitPieceText(kind, absl::string_view(buf_).substr(start, end - start), first_piece_id_ + piece,
                  out);
    start = end;
  }
}

void StreamParser::EmitPieceText(ParsedKind kind, absl::string_view text, std::size_t piece,
                                 std::vector<ParsedEvent>& out) {
  if (strip_newlines_) {
    std::size_t skip = 0;
    while (skip < text.size() && text[skip] == '\n') ++skip;
    text.remove_prefix(skip);
    if (text.empty()) return;
    strip_newlines_ = false;
  }
  if (text.empty()) return;
  std::string value;
  if (state_ == State::kJsonBefore || state_ == State::kJsonAfter) {
    value = " ";  // text around the JSON value is blanked, one space per piece
  } else if (state_ == State::kParamValue && value_is_string_) {
    AppendJsonEscaped(text, value);
  } else {
    value = std::string(text);
  }
  if (state_ == State::kParamKey) {
    last_piece_ = piece;
    EmitKeyPart(std::move(value), out);
    return;
  }
  out.push_back(ParsedEvent{kind, std::move(value)});
}

void StreamParser::EmitKeyPart(std::string text, std::vector<ParsedEvent>& out) {
  // The quoted key streams as one argument piece per pushed piece, quotes included.
  if (key_piece_ == last_piece_ && key_event_ + 1 == out.size()) {
    out.back().text += text;
    return;
  }
  out.push_back(ParsedEvent{ParsedKind::kToolArguments, std::move(text)});
  key_piece_ = last_piece_;
  key_event_ = out.size() - 1;
}

void StreamParser::EmitMarkup(ParsedKind kind, std::string text, std::vector<ParsedEvent>& out) {
  out.push_back(ParsedEvent{kind, std::move(text)});
}

}  // namespace tandem::recipe
