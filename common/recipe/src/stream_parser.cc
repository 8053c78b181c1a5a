#include "tandem/recipe/stream_parser.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem::recipe {
namespace {

// Model-format spellings (FULLWIDTH VERTICAL LINE U+FF5C around DSML).
constexpr absl::string_view kThinkEnd = "</think>";
constexpr absl::string_view kDsmlOpen = "<\xEF\xBD\x9C" "DSML\xEF\xBD\x9C";
constexpr absl::string_view kDsmlClose = "</\xEF\xBD\x9C" "DSML\xEF\xBD\x9C";
constexpr absl::string_view kFenceOpen = "```json";
constexpr absl::string_view kFence = "```";


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

}  // namespace

// ---- TagScanner ----

void TagScanner::Reset(const std::vector<Tag>* tags) {
  tags_ = tags;
  candidates_.assign(tags->size(), Candidate{});
  next_ = 0;
}

namespace {

enum Fit { kComplete, kPartial, kNoMatch };

Fit FitTag(const TagScanner::Tag& tag, absl::string_view candidate, bool literal_only) {
  if (tag.leading_newlines && !literal_only) {
    std::size_t run = 0;
    while (run < candidate.size() && candidate[run] == '\n') ++run;
    candidate.remove_prefix(run);
  }
  absl::string_view literal = tag.literal;
  if (candidate == literal) return kComplete;
  if (candidate.size() < literal.size() && literal.substr(0, candidate.size()) == candidate) {
    return kPartial;
  }
  return kNoMatch;
}

}  // namespace

std::optional<TagScanner::Found> TagScanner::Scan(absl::string_view text, std::size_t from) {
  if (next_ < from) Reset(tags_), next_ = from;
  for (std::size_t i = next_; i < text.size(); ++i) {
    for (std::size_t t = 0; t < tags_->size(); ++t) {
      const Tag& tag = (*tags_)[t];
      Candidate& candidate = candidates_[t];
      Fit fit;
      if (candidate.start != SIZE_MAX) {
        fit = FitTag(tag, text.substr(candidate.start, i + 1 - candidate.start),
                     candidate.literal_only);
        if (fit == kNoMatch) {
          candidate = Candidate{i, true};
          fit = FitTag(tag, text.substr(i, 1), true);
        }
      } else {
        candidate = Candidate{i, false};
        fit = FitTag(tag, text.substr(i, 1), false);
      }
      if (fit == kNoMatch) {
        candidate = Candidate{};
      } else if (fit == kComplete) {
        Found found{candidate.start, i + 1, tag.id};
        Reset(tags_);
        next_ = found.end;
        return found;
      }
    }
  }
  next_ = text.size();
  return std::nullopt;
}

std::size_t TagScanner::EarliestCandidate() const {
  std::size_t earliest = SIZE_MAX;
  for (const Candidate& candidate : candidates_) earliest = std::min(earliest, candidate.start);
  return earliest;
}

void TagScanner::Shift(std::size_t count) {
  next_ = next_ > count ? next_ - count : 0;
  for (Candidate& candidate : candidates_) {
    if (candidate.start != SIZE_MAX) candidate.start -= count;
  }
}

// ---- PieceBuffer ----

void StreamParser::PieceBuffer::Append(absl::string_view piece) {
  text.append(piece.data(), piece.size());
  ends.push_back(text.size());
}

std::size_t StreamParser::PieceBuffer::PieceAt(std::size_t offset) const {
  return static_cast<std::size_t>(std::upper_bound(ends.begin(), ends.end(), offset) - ends.begin());
}

void StreamParser::PieceBuffer::Drop(std::size_t count) {
  std::size_t dropped = 0;
  while (dropped < ends.size() && ends[dropped] <= count) ++dropped;
  ends.erase(ends.begin(), ends.begin() + dropped);
  for (std::size_t& end : ends) end -= count;
  first_id += dropped;
  text.erase(0, count);
}

// ---- StreamParser ----

StreamParser::StreamParser(const ParsingOptions& options) : options_(options) {
  BuildTags();
  if (options_.starts_in_tool_calls && options_.parse_tool_calls) {
    EnterState(State::kBetweenInvokes);
  } else if (options_.thinking_initial_stage.has_value() &&
             *options_.thinking_initial_stage != ThinkingInitialStage::kContentContinuation) {
    EnterState(State::kReasoning);
    strip_newlines_ = *options_.thinking_initial_stage == ThinkingInitialStage::kReasoningStart;
  } else {
    EnterState(options_.parse_json_output ? State::kJsonBefore : State::kContent);
    // Outside thinking mode a new answer starts fresh; a continued one keeps its newlines.
    strip_newlines_ = !options_.thinking_initial_stage.has_value();
  }
  stop_scanner_.Reset(&stop_tags_);
}

void StreamParser::BuildTags() {
  auto add = [&](State state, int id, bool newlines, absl::string_view literal) {
    tags_[static_cast<int>(state)].push_back(TagScanner::Tag{id, newlines, std::string(literal)});
  };
  add(State::kReasoning, kPatThinkEnd, true, kThinkEnd);
  if (options_.parse_tool_calls) add(State::kReasoning, kPatToolBlock, true, kDsmlOpen);
  add(State::kContent, kPatThinkEnd, false, kThinkEnd);
  if (options_.parse_tool_calls) add(State::kContent, kPatToolBlock, true, kDsmlOpen);
  add(State::kJsonBefore, kPatJsonFence, false, kFenceOpen);
  add(State::kJsonBefore, kPatJsonObject, false, "{");
  add(State::kJsonBefore, kPatJsonArray, false, "[");
  add(State::kJsonFenced, kPatFenceClose, true, kFence);
  add(State::kParamKey, kPatKeyEnd, false, " ");
  add(State::kParamValue, kPatValueEnd, false, kDsmlClose);
  for (std::size_t s = 0; s < options_.stop_sequences.size(); ++s) {
    if (options_.stop_sequences[s].empty()) continue;
    stop_tags_.push_back(TagScanner::Tag{static_cast<int>(s), false, options_.stop_sequences[s]});
  }
}

void StreamParser::EnterState(State state) {
  state_ = state;
  scanner_.Reset(&tags_[static_cast<int>(state)]);
}

void StreamParser::Push(absl::string_view piece, std::vector<ParsedEvent>& out) {
  if (stopped() || state_ == State::kDone) return;
  std::string text = std::move(utf8_tail_);
  utf8_tail_.clear();
  text.append(piece.data(), piece.size());
  std::size_t whole = CompleteUtf8Prefix(text);
  utf8_tail_ = text.substr(whole);
  text.resize(whole);
  if (text.empty()) return;
  buf_.Append(text);
  Process(out, /*at_end=*/false);
}

void StreamParser::Finish(std::vector<ParsedEvent>& out) {
  if (stopped()) return;
  // An unfinished UTF-8 sequence at the very end cannot become a character any more.
  utf8_tail_.clear();
  if (state_ != State::kDone) Process(out, /*at_end=*/true);
  FlushStopFilter(out);
}

void StreamParser::Process(std::vector<ParsedEvent>& out, bool at_end) {
  std::size_t pos = 0;
  while (pos < buf_.text.size() && !stopped() && state_ != State::kDone) {
    bool progressed;
    switch (state_) {
      case State::kReasoning:
      case State::kContent:
      case State::kJsonBefore:
      case State::kJsonValue:
      case State::kJsonFenced:
      case State::kJsonAfter:
      case State::kParamKey:
      case State::kParamValue:
        progressed = StepText(pos, out, at_end);
        break;
      default:
        progressed = StepMarkup(pos, out);
        break;
    }
    if (!progressed) break;
  }
  if (stopped() || state_ == State::kDone || at_end) pos = buf_.text.size();
  buf_.Drop(pos);
  scanner_.Shift(pos);
  decided_ = decided_ > pos ? decided_ - pos : 0;
}

bool StreamParser::StepText(std::size_t& pos, std::vector<ParsedEvent>& out, bool at_end) {
  // With stop sequences, answer bytes reach the stop layer as soon as no tag can claim them, even
  // while their piece is still held for emission (the oracle stops in the push that completes
  // the stop sequence).
  const bool stops = StopsApply();
  decided_ = std::max(decided_, pos);
  if (std::optional<TagScanner::Found> found = scanner_.Scan(buf_.text, pos)) {
    if (stops) {
      Decide(decided_, found->start, out);
      if (!stopped()) ReleaseStops(UINT64_MAX, out);
    } else {
      EmitText(pos, found->start, out);
    }
    pos = found->end;
    decided_ = pos;
    if (stopped()) return false;
    segment_break_ = true;
    OnTag(found->id, out);
    return true;
  }
  std::size_t release = buf_.text.size();
  std::size_t earliest = at_end ? SIZE_MAX : scanner_.EarliestCandidate();
  if (earliest != SIZE_MAX) {
    // The piece holding a possible tag is held whole; earlier pieces are decided.
    std::size_t piece = buf_.PieceAt(earliest);
    release = std::max(piece == 0 ? std::size_t{0} : buf_.ends[piece - 1], pos);
  }
  if (stops) {
    std::size_t decided_end = earliest == SIZE_MAX ? buf_.text.size() : earliest;
    Decide(decided_, decided_end, out);
    decided_ = std::max(decided_, decided_end);
    if (!stopped()) {
      ReleaseStops(release == buf_.text.size() ? UINT64_MAX : buf_.first_id + buf_.PieceAt(release),
                   out);
    }
  } else {
    EmitText(pos, release, out);
  }
  pos = release;
  return false;
}

void StreamParser::OnTag(int id, std::vector<ParsedEvent>& out) {
  switch (id) {
    case kPatThinkEnd:
      if (state_ == State::kReasoning) {
        EnterState(options_.parse_json_output ? State::kJsonBefore : State::kContent);
        strip_newlines_ = true;
      }
      // In the answer a stray </think> is dropped.
      break;
    case kPatToolBlock:
      EnterState(State::kBlockOpen);
      break;
    case kPatKeyEnd:
      Emit(ParsedKind::kToolArguments, ": ", out);
      EnterState(State::kParamKeyEnd);
      break;
    case kPatValueEnd:
      if (value_is_string_) Emit(ParsedKind::kToolArguments, "\"", out);
      after_close_tag_ = State::kInvokeBody;
      EnterState(State::kCloseTag);
      break;
    case kPatJsonFence:
      EnterState(State::kJsonFenced);
      strip_newlines_ = true;
      break;
    case kPatJsonObject:
    case kPatJsonArray:
      EnterState(State::kJsonValue);
      Emit(ParsedKind::kContent, id == kPatJsonObject ? "{" : "[", out);
      break;
    case kPatFenceClose:
      EnterState(State::kJsonAfter);
      break;
    default:
      break;
  }
}

bool StreamParser::StepMarkup(std::size_t& pos, std::vector<ParsedEvent>& out) {
  absl::string_view text(buf_.text);
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
        return index;
      }
      if (rest.size() < literal.size() && literal.substr(0, rest.size()) == rest) partial = true;
      ++index;
    }
    return partial ? -1 : -2;
  };
  static const std::string kInvoke = absl::StrCat(kDsmlOpen, "invoke name=");
  static const std::string kInvokeSpaced = absl::StrCat(kDsmlOpen, " invoke name=");
  static const std::string kParam = absl::StrCat(kDsmlOpen, "parameter name=");
  static const std::string kParamSpaced = absl::StrCat(kDsmlOpen, " parameter name=");
  static const std::string kClose(kDsmlClose);

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
      }
      return true;
    case State::kInvokeName: {
      if (text[pos] != '"') {
        got = -2;
        break;
      }
      std::size_t close = text.find('"', pos + 1);
      if (close == absl::string_view::npos) return false;
      std::string name(text.substr(pos + 1, close - pos - 1));
      pos = close + 1;
      ++tool_calls_;
      invoke_has_params_ = false;
      Emit(ParsedKind::kToolCallStart, std::move(name), out);
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
        Emit(ParsedKind::kToolArguments, invoke_has_params_ ? "}" : "{}", out);
        after_close_tag_ = State::kBetweenInvokes;
        EnterState(State::kCloseTag);
      } else {
        Emit(ParsedKind::kToolArguments, invoke_has_params_ ? ", " : "{", out);
        invoke_has_params_ = true;
        EnterState(State::kParamKey);
      }
      return true;
    case State::kParamKeyEnd:
      got = expect({"string=\"true\">", "string=\"false\">"});
      if (got < 0) break;
      value_is_string_ = got == 0;
      EnterState(State::kParamValue);
      if (value_is_string_) Emit(ParsedKind::kToolArguments, "\"", out);
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
  while (from < to) {
    std::size_t end = std::min(to, buf_.ends[buf_.PieceAt(from)]);
    EmitPiece(absl::string_view(buf_.text).substr(from, end - from), out);
    from = end;
  }
}

void StreamParser::EmitPiece(absl::string_view text, std::vector<ParsedEvent>& out) {
  if (strip_newlines_) {
    std::size_t skip = 0;
    while (skip < text.size() && text[skip] == '\n') ++skip;
    text.remove_prefix(skip);
    if (text.empty()) return;
    strip_newlines_ = false;
  }
  switch (state_) {
    case State::kReasoning:
      Emit(ParsedKind::kReasoning, std::string(text), out);
      break;
    case State::kJsonBefore:
    case State::kJsonAfter:
      Emit(ParsedKind::kContent, " ", out);  // text around the JSON value: one space per piece
      break;
    case State::kParamKey:
      Emit(ParsedKind::kToolArguments, std::string(text), out);
      break;
    case State::kParamValue: {
      std::string value;
      if (value_is_string_) {
        AppendJsonEscaped(text, value);
      } else {
        value = std::string(text);
      }
      Emit(ParsedKind::kToolArguments, std::move(value), out);
      break;
    }
    default:
      Emit(ParsedKind::kContent, std::string(text), out);
      break;
  }
}

bool StreamParser::StopsApply() const {
  return !stop_tags_.empty() && (state_ == State::kContent || state_ == State::kJsonValue ||
                                 state_ == State::kJsonFenced);
}

void StreamParser::Emit(ParsedKind kind, std::string text, std::vector<ParsedEvent>& out) {
  if (kind == ParsedKind::kContent && StopsApply()) {
    // Markup-made answer text (a bare JSON value's bracket) is its own event.
    segment_break_ = true;
    DecideSegment(text, 0, out);
    segment_break_ = true;
    if (!stopped()) ReleaseStops(UINT64_MAX, out);
    return;
  }
  if (kind != ParsedKind::kContent) FlushStopFilter(out);
  out.push_back(ParsedEvent{kind, std::move(text)});
}

void StreamParser::Decide(std::size_t from, std::size_t to, std::vector<ParsedEvent>& out) {
  while (from < to && !stopped()) {
    std::size_t piece = buf_.PieceAt(from);
    std::size_t end = std::min(to, buf_.ends[piece]);
    absl::string_view text = absl::string_view(buf_.text).substr(from, end - from);
    from = end;
    if (strip_newlines_) {
      std::size_t skip = 0;
      while (skip < text.size() && text[skip] == '\n') ++skip;
      text.remove_prefix(skip);
      if (text.empty()) continue;
      strip_newlines_ = false;
    }
    DecideSegment(text, buf_.first_id + piece, out);
  }
}

void StreamParser::DecideSegment(absl::string_view text, std::uint64_t piece,
                                 std::vector<ParsedEvent>& out) {
  if (text.empty()) return;
  stop_text_.append(text.data(), text.size());
  if (!segment_break_ && !stop_segments_.empty() && stop_segments_.back().piece == piece) {
    stop_segments_.back().end = stop_text_.size();
  } else {
    stop_segments_.push_back(Segment{stop_text_.size(), piece});
  }
  segment_break_ = false;
  std::optional<TagScanner::Found> found = stop_scanner_.Scan(stop_text_, 0);
  if (!found) return;
  matched_stop_ = options_.stop_sequences[found->id];
  std::size_t begin = 0;
  for (const Segment& segment : stop_segments_) {
    std::size_t end = std::min(segment.end, found->start);
    if (end > begin) out.push_back(ParsedEvent{ParsedKind::kContent, stop_text_.substr(begin, end - begin)});
    begin = segment.end;
    if (begin >= found->start) break;
  }
  stop_text_.clear();
  stop_segments_.clear();
}

void StreamParser::ReleaseStops(std::uint64_t piece_limit, std::vector<ParsedEvent>& out) {
  std::size_t hold = stop_scanner_.EarliestCandidate();
  std::size_t begin = 0;
  std::size_t count = 0;
  for (const Segment& segment : stop_segments_) {
    // A segment holding a possible stop sequence is held whole, as are pieces the tag layer holds.
    if (segment.piece >= piece_limit || (hold != SIZE_MAX && segment.end > hold)) break;
    out.push_back(ParsedEvent{ParsedKind::kContent, stop_text_.substr(begin, segment.end - begin)});
    begin = segment.end;
    ++count;
  }
  if (count == 0) return;
  stop_segments_.erase(stop_segments_.begin(), stop_segments_.begin() + count);
  for (Segment& segment : stop_segments_) segment.end -= begin;
  stop_text_.erase(0, begin);
  stop_scanner_.Shift(begin);
}

void StreamParser::FlushStopFilter(std::vector<ParsedEvent>& out) {
  if (stop_segments_.empty() || stopped()) return;
  std::size_t begin = 0;
  for (const Segment& segment : stop_segments_) {
    out.push_back(ParsedEvent{ParsedKind::kContent, stop_text_.substr(begin, segment.end - begin)});
    begin = segment.end;
  }
  stop_text_.clear();
  stop_segments_.clear();
  stop_scanner_.Reset(&stop_tags_);
}

}  // namespace tandem::recipe
