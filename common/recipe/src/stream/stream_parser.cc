#include "tandem/recipe/stream_parser.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem::recipe {
namespace {

// Model-format spellings (FULLWIDTH VERTICAL LINE U+FF5C around DSML).
constexpr absl::string_view kThinkEnd = "</think>";
constexpr absl::string_view kDsmlOpen =
    "<\xEF\xBD\x9C"
    "DSML\xEF\xBD\x9C";
constexpr absl::string_view kDsmlClose =
    "</\xEF\xBD\x9C"
    "DSML\xEF\xBD\x9C";
constexpr absl::string_view kFenceOpen = "```json\n";
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
  kPatInvoke = 8,
  kPatBlockEnd = 9,
  kPatParam = 10,
  kPatInvokeEnd = 11,
  kPatStringTrue = 12,
  kPatStringFalse = 13,
};

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
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
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
    if (run < tag.min_newlines && run < candidate.size()) return kNoMatch;
    if (run < tag.min_newlines) return kPartial;
    candidate.remove_prefix(run);
  } else if (tag.min_newlines > 0) {
    return kNoMatch;
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

void TagScanner::Truncate(std::size_t size) {
  next_ = std::min(next_, size);
  for (Candidate& candidate : candidates_) {
    if (candidate.start != SIZE_MAX && candidate.start >= size) candidate = Candidate{};
  }
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
  return static_cast<std::size_t>(std::upper_bound(ends.begin(), ends.end(), offset) -
                                  ends.begin());
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
  auto add = [&](State state, int id, bool newlines, absl::string_view literal,
                 std::size_t min_newlines = 0) {
    tags_[static_cast<int>(state)].push_back(
        TagScanner::Tag{id, newlines, std::string(literal), min_newlines});
  };
  add(State::kReasoning, kPatThinkEnd, true, kThinkEnd);
  if (options_.parse_tool_calls) add(State::kReasoning, kPatToolBlock, true, kDsmlOpen);
  add(State::kContent, kPatThinkEnd, false, kThinkEnd);
  if (options_.parse_tool_calls) add(State::kContent, kPatToolBlock, true, kDsmlOpen);
  add(State::kJsonBefore, kPatJsonFence, false, kFenceOpen);
  add(State::kJsonBefore, kPatJsonFence, false, absl::StrCat(kFence, "\n"));
  add(State::kJsonBefore, kPatJsonObject, false, "{");
  add(State::kJsonBefore, kPatJsonArray, false, "[");
  // A JSON value ends at a fence on a line of its own (fenced or not).
  add(State::kJsonFenced, kPatFenceClose, true, kFence, 1);
  add(State::kJsonValue, kPatFenceClose, true, kFence, 1);
  // Inside the block, text between the tags is skipped; the tags are matched by their names
  // (the DSML marker before "invoke" / "parameter" is not required), closing tags by prefix.
  add(State::kBetweenInvokes, kPatInvoke, false, "invoke name=");
  add(State::kBetweenInvokes, kPatBlockEnd, false, absl::StrCat(kDsmlClose, "tool_calls>"));
  add(State::kBetweenInvokes, kPatBlockEnd, false, absl::StrCat(kDsmlClose, " calls>"));
  add(State::kInvokeBody, kPatParam, false, "parameter name=");
  add(State::kInvokeBody, kPatInvokeEnd, false, kDsmlClose);
  add(State::kParamKey, kPatKeyEnd, false, " ");
  add(State::kParamKeyEnd, kPatStringTrue, false, "true\">");
  add(State::kParamKeyEnd, kPatStringFalse, false, "false\">");
  add(State::kParamValue, kPatValueEnd, false, kDsmlClose);
  for (std::size_t s = 0; s < options_.stop_sequences.size(); ++s) {
    if (options_.stop_sequences[s].empty()) continue;
    stop_tags_.push_back(
        TagScanner::Tag{static_cast<int>(s), false, options_.stop_sequences[s], 0});
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
  ++pieces_;
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
      case State::kBetweenInvokes:
      case State::kInvokeBody:
      case State::kParamKeyEnd:
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
  // Dropped bytes were decided: no tag can claim them any more.
  buf_base_ += pos;
  fed_.erase(std::remove_if(fed_.begin(), fed_.end(),
                            [&](const Fed& fed) { return fed.buf_end <= buf_base_; }),
             fed_.end());
}

bool StreamParser::StepText(std::size_t& pos, std::vector<ParsedEvent>& out, bool at_end) {
  // Stop sequences see every answer byte as it arrives, even one a tag may still claim (the
  // oracle stops in the push that completes the stop sequence, and a stop sequence made of
  // newlines beats the tool block those newlines would open).
  const bool stops = StopsApply();
  decided_ = std::max(decided_, pos);
  std::optional<TagScanner::Found> found = scanner_.Scan(buf_.text, pos);
  if (stops) {
    Decide(decided_, found ? found->end : buf_.text.size(), out);
    if (found && !stopped()) HideStops(found->start);  // the tag's bytes are not answer
    decided_ = found ? found->end : buf_.text.size();
    if (stopped()) return false;
  }
  if (found) {
    if (stops) {
      ReleaseStops(UINT64_MAX, out);
    } else {
      EmitText(pos, found->start, out);
    }
    pos = found->end;
    // The block's first tag is read as block markup: only its newlines are consumed here.
    if (found->id == kPatToolBlock) pos -= kDsmlOpen.size();
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
    ReleaseStops(release == buf_.text.size() ? UINT64_MAX : buf_.first_id + buf_.PieceAt(release),
                 out);
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
      } else {
        strip_newlines_ = false;  // a stray </think> in the answer is dropped; the answer began
      }
      break;
    case kPatToolBlock:
      EnterState(State::kBetweenInvokes);
      strip_newlines_ = false;
      Emit(ParsedKind::kToolBlockStart, "", out);
      break;
    case kPatKeyEnd:
      Emit(ParsedKind::kToolArguments, ": ", out);
      EnterState(State::kParamKeyEnd);
      break;
    case kPatValueEnd:
      if (value_is_string_) Emit(ParsedKind::kToolArguments, "\"", out);
      // The rest of the closing tag is skipped as text of the invoke.
      EnterState(State::kInvokeBody);
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
    case kPatInvoke:
      EnterState(State::kInvokeName);
      break;
    case kPatBlockEnd:
      EnterState(State::kDone);
      break;
    case kPatParam:
      Emit(ParsedKind::kToolArguments, invoke_has_params_ ? ", " : "{", out);
      invoke_has_params_ = true;
      EnterState(State::kParamKey);
      break;
    case kPatInvokeEnd:
      Emit(ParsedKind::kToolArguments, invoke_has_params_ ? "}" : "{}", out);
      EnterState(State::kBetweenInvokes);
      break;
    case kPatStringTrue:
    case kPatStringFalse:
      value_is_string_ = id == kPatStringTrue;
      EnterState(State::kParamValue);
      if (value_is_string_) Emit(ParsedKind::kToolArguments, "\"", out);
      break;
    default:
      break;
  }
}

bool StreamParser::StepMarkup(std::size_t& pos, std::vector<ParsedEvent>& out) {
  absl::string_view text(buf_.text);
  switch (state_) {
    case State::kInvokeName: {
      if (text[pos] != '"') {  // not an invoke after all: look for the next one
        EnterState(State::kBetweenInvokes);
        return true;
      }
      std::size_t close = text.find('"', pos + 1);
      if (close == absl::string_view::npos) return false;
      std::string name(text.substr(pos + 1, close - pos - 1));
      pos = close + 1;
      ++tool_calls_;
      invoke_has_params_ = false;
      Emit(ParsedKind::kToolCallStart, std::move(name), out);
      EnterState(State::kInvokeBody);
      return true;
    }
    default:
      return false;
  }
}

void StreamParser::EmitText(std::size_t from, std::size_t to, std::vector<ParsedEvent>& out) {
  while (from < to) {
    std::size_t piece = buf_.PieceAt(from);
    std::size_t end = std::min(to, buf_.ends[piece]);
    std::size_t before = out.size();
    EmitPiece(absl::string_view(buf_.text).substr(from, end - from), out);
    for (std::size_t i = before; i < out.size(); ++i) out[i].piece = buf_.first_id + piece;
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
    case State::kBetweenInvokes:
    case State::kInvokeBody:
    case State::kParamKeyEnd:
      break;  // text between block tags is skipped
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
  return !stop_tags_.empty() &&
         (state_ == State::kContent || state_ == State::kJsonValue || state_ == State::kJsonFenced);
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
    std::size_t first = from;
    from = end;
    if (strip_newlines_) {
      std::size_t skip = 0;
      while (skip < text.size() && text[skip] == '\n') ++skip;
      text.remove_prefix(skip);
      first += skip;
      if (text.empty()) continue;
      strip_newlines_ = false;
    }
    const std::size_t first_abs = buf_base_ + first;
    if (fed_.empty() || fed_.back().buf_end != first_abs) {
      fed_.push_back(Fed{first_abs, first_abs, stop_base_ + stop_text_.size()});
    }
    fed_.back().buf_end = first_abs + text.size();
    DecideSegment(text, buf_.first_id + piece, out);
  }
}

void StreamParser::HideStops(std::size_t buf_offset) {
  const std::size_t offset = buf_base_ + buf_offset;
  std::size_t cut = stop_text_.size();
  for (const Fed& fed : fed_) {
    if (offset < fed.buf_end) {
      std::size_t cut_abs = fed.stop_start + (offset > fed.buf_start ? offset - fed.buf_start : 0);
      cut = cut_abs > stop_base_ ? cut_abs - stop_base_ : 0;
      break;
    }
  }
  fed_.clear();
  if (cut >= stop_text_.size()) return;
  // The bytes stay for the stop matcher (they did break its candidates) but are never output.
  while (!stop_segments_.empty()) {
    std::size_t start =
        stop_segments_.size() > 1 ? stop_segments_[stop_segments_.size() - 2].end : 0;
    if (start < cut) break;
    stop_segments_.pop_back();
  }
  if (!stop_segments_.empty()) stop_segments_.back().end = std::min(stop_segments_.back().end, cut);
  stop_segments_.push_back(Segment{stop_text_.size(), 0, /*hidden=*/true});
}

void StreamParser::DecideSegment(absl::string_view text, std::uint64_t piece,
                                 std::vector<ParsedEvent>& out) {
  if (text.empty()) return;
  stop_text_.append(text.data(), text.size());
  if (!segment_break_ && !stop_segments_.empty() && !stop_segments_.back().hidden &&
      stop_segments_.back().piece == piece) {
    stop_segments_.back().end = stop_text_.size();
  } else {
    stop_segments_.push_back(Segment{stop_text_.size(), piece, false});
  }
  segment_break_ = false;
  std::optional<TagScanner::Found> found = stop_scanner_.Scan(stop_text_, 0);
  if (!found) return;
  matched_stop_ = options_.stop_sequences[found->id];
  EmitSegments(stop_segments_.size(), found->start, out);
  stop_text_.clear();
  stop_segments_.clear();
}

std::size_t StreamParser::EmitSegments(std::size_t count, std::size_t limit,
                                       std::vector<ParsedEvent>& out) {
  std::size_t begin = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const Segment& segment = stop_segments_[i];
    std::size_t end = std::min(segment.end, limit);
    if (!segment.hidden && end > begin) {
      out.push_back(ParsedEvent{ParsedKind::kContent, stop_text_.substr(begin, end - begin)});
    }
    begin = segment.end;
    if (begin >= limit) break;
  }
  return begin;
}

void StreamParser::ReleaseStops(std::uint64_t piece_limit, std::vector<ParsedEvent>& out) {
  std::size_t hold = stop_scanner_.EarliestCandidate();
  std::size_t count = 0;
  for (const Segment& segment : stop_segments_) {
    // A segment holding a possible stop sequence is held whole, as are pieces the tag layer holds.
    if (segment.piece >= piece_limit || (hold != SIZE_MAX && segment.end > hold)) break;
    ++count;
  }
  if (count == 0) return;
  std::size_t begin = EmitSegments(count, SIZE_MAX, out);
  stop_segments_.erase(stop_segments_.begin(), stop_segments_.begin() + count);
  for (Segment& segment : stop_segments_) segment.end -= begin;
  stop_text_.erase(0, begin);
  stop_base_ += begin;
  stop_scanner_.Shift(begin);
}

void StreamParser::FlushStopFilter(std::vector<ParsedEvent>& out) {
  if (stop_segments_.empty() || stopped()) return;
  EmitSegments(stop_segments_.size(), SIZE_MAX, out);
  stop_base_ += stop_text_.size();
  stop_text_.clear();
  stop_segments_.clear();
  fed_.clear();
  stop_scanner_.Reset(&stop_tags_);
}

}  // namespace tandem::recipe
