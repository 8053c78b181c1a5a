#include "pretokenizer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "pretokenizer_patterns.h"
#include "tandem/base/status_macros.h"
#include "unicode_text.h"

namespace tandem::tokenizer::internal {
namespace {

using Range = std::pair<std::size_t, std::size_t>;

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

absl::StatusOr<Behavior> ParseBehavior(const Json& step, const std::string& where) {
  TANDEM_ASSIGN_OR_RETURN(std::string name, StringField(step, where, "behavior"));
  if (name == "Removed") return Behavior::kRemoved;
  if (name == "Isolated") return Behavior::kIsolated;
  if (name == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::kMergedWithNext;
  if (name == "Contiguous") return Behavior::kContiguous;
  return FieldError(where + ".behavior", absl::StrCat("unknown behavior '", name, "'"));
}

absl::StatusOr<std::u32string> ToCodePoints(const std::string& s, const std::string& where) {
  CodePoints cps;
  absl::Status st = DecodeUtf8(s, &cps);
  if (!st.ok()) return FieldError(where, st.message());
  return std::u32string(cps.cp.begin(), cps.cp.end());
}

// Every char of the class `bits` is a match of its own.
class CharClassPattern final : public Pattern {
 public:
  explicit CharClassPattern(std::uint8_t bits) : bits_(bits) {}
  std::size_t MatchAt(const CodePoints& t, std::size_t pos, std::size_t end) const override {
    return (t.cls[pos] & bits_) ? pos + 1 : pos;
  }

 private:
  std::uint8_t bits_;
};

}  // namespace

struct PreTokenizer::Step {
  std::unique_ptr<Pattern> pattern;
  Behavior behavior = Behavior::kIsolated;
  bool invert = false;

  // Splits [begin, end) the way the reference's NormalizedString::split does: the text is cut into
  // alternating (gap, match) spans, then spans are dropped or merged as the behavior says.
  void Apply(const CodePoints& text, Range range, std::vector<Range>* out,
             std::vector<Range>* matches) const {
    matches->clear();
    pattern->FindAll(text, range.first, range.second, matches);
    // (span, is_match) in order, covering the range.
    std::vector<std::pair<Range, bool>> spans;
    spans.reserve(2 * matches->size() + 1);
    std::size_t pos = range.first;
    for (const Range& m : *matches) {
      if (m.first > pos) spans.push_back({{pos, m.first}, invert});
      spans.push_back({m, !invert});
      pos = m.second;
    }
    if (pos < range.second) spans.push_back({{pos, range.second}, invert});

    const std::size_t first_out = out->size();
    bool previous_match = false;
    switch (behavior) {
      case Behavior::kIsolated:
        for (const auto& s : spans) out->push_back(s.first);
        break;
      case Behavior::kRemoved:
        for (const auto& s : spans) {
          if (!s.second) out->push_back(s.first);
        }
        break;
      case Behavior::kContiguous:
        for (const auto& [span, is_match] : spans) {
          if (is_match == previous_match && out->size() > first_out) {
            out->back().second = span.second;
          } else {
            out->push_back(span);
          }
          previous_match = is_match;
        }
        break;
      case Behavior::kMergedWithPrevious:
        for (const auto& [span, is_match] : spans) {
          if (is_match && !previous_match && out->size() > first_out) {
            out->back().second = span.second;
          } else {
            out->push_back(span);
          }
          previous_match = is_match;
        }
        break;
      case Behavior::kMergedWithNext: {
        std::vector<Range> reversed;
        for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
          const auto& [span, is_match] = *it;
          if (is_match && !previous_match && !reversed.empty()) {
            reversed.back().first = span.first;
          } else {
            reversed.push_back(span);
          }
          previous_match = is_match;
        }
        out->insert(out->end(), reversed.rbegin(), reversed.rend());
        break;
      }
    }
  }
};

PreTokenizer::PreTokenizer() = default;
PreTokenizer::~PreTokenizer() = default;

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::FromJson(const Json* json) {
  std::unique_ptr<PreTokenizer> pre(new PreTokenizer());
  if (json != nullptr) TANDEM_RETURN_IF_ERROR(AddSteps(*json, "pre_tokenizer", pre.get()));
  return pre;
}

absl::Status PreTokenizer::AddSteps(const Json& json, const std::string& where,
                                    PreTokenizer* out) {
  if (out->byte_level_) {
    return FieldError(where, "a pre-tokenizer after ByteLevel is not supported (ByteLevel must be "
                             "the last step)");
  }
  TANDEM_ASSIGN_OR_RETURN(std::string type, StringField(json, where, "type"));
  if (type == "Sequence") {
    TANDEM_ASSIGN_OR_RETURN(const Json* list, Field(json, where, "pretokenizers"));
    if (!list->is_array()) return FieldError(where + ".pretokenizers", "expected an array");
    for (std::size_t i = 0; i < list->size(); ++i) {
      TANDEM_RETURN_IF_ERROR(
          AddSteps((*list)[i], absl::StrCat(where, ".pretokenizers[", i, "]"), out));
    }
    return absl::OkStatus();
  }
  if (type == "Split") {
    auto step = std::make_unique<Step>();
    TANDEM_ASSIGN_OR_RETURN(const Json* pattern, Field(json, where, "pattern"));
    const std::string pwhere = where + ".pattern";
    if (const Json* regex = OptionalField(*pattern, "Regex"); regex != nullptr) {
      if (!regex->is_string()) return FieldError(pwhere + ".Regex", "expected a string");
      TANDEM_ASSIGN_OR_RETURN(step->pattern, RegexPattern(regex->get<std::string>(),
                                                          pwhere + ".Regex"));
    } else if (const Json* literal = OptionalField(*pattern, "String"); literal != nullptr) {
      if (!literal->is_string()) return FieldError(pwhere + ".String", "expected a string");
      TANDEM_ASSIGN_OR_RETURN(std::u32string cps,
                              ToCodePoints(literal->get<std::string>(), pwhere + ".String"));
      step->pattern = LiteralPattern(cps);
    } else {
      return FieldError(pwhere, "expected {\"Regex\": ...} or {\"String\": ...}");
    }
    TANDEM_ASSIGN_OR_RETURN(step->behavior, ParseBehavior(json, where));
    TANDEM_ASSIGN_OR_RETURN(step->invert, BoolField(json, where, "invert", false));
    out->steps_.push_back(std::move(step));
    return absl::OkStatus();
  }
  if (type == "Digits") {
    TANDEM_ASSIGN_OR_RETURN(bool individual, BoolField(json, where, "individual_digits", false));
    auto step = std::make_unique<Step>();
    step->pattern = std::make_unique<CharClassPattern>(kClassNumber);
    step->behavior = individual ? Behavior::kIsolated : Behavior::kContiguous;
    out->steps_.push_back(std::move(step));
    return absl::OkStatus();
  }
  if (type == "ByteLevel") {
    out->byte_level_ = true;
    TANDEM_ASSIGN_OR_RETURN(out->add_prefix_space_,
                            BoolField(json, where, "add_prefix_space", true));
    TANDEM_ASSIGN_OR_RETURN(bool use_regex, BoolField(json, where, "use_regex", true));
    if (use_regex) out->byte_level_regex_ = Gpt2Pattern();
    return absl::OkStatus();
  }
  return FieldError(where + ".type", absl::StrCat("unsupported pre-tokenizer '", type, "'"));
}

absl::Status PreTokenizer::Split(absl::string_view text, std::vector<absl::string_view>* pieces,
                                 std::deque<std::string>* storage) const {
  CodePoints cps;
  TANDEM_RETURN_IF_ERROR(DecodeUtf8(text, &cps));
  std::vector<Range> ranges, next, scratch;
  if (cps.size() > 0) ranges.push_back({0, cps.size()});
  for (const auto& step : steps_) {
    next.clear();
    for (const Range& r : ranges) step->Apply(cps, r, &next, &scratch);
    std::swap(ranges, next);
  }
  auto view = [&](const Range& r) {
    return text.substr(cps.offset[r.first], cps.offset[r.second] - cps.offset[r.first]);
  };
  if (!add_prefix_space_ && byte_level_regex_ == nullptr) {
    for (const Range& r : ranges) pieces->push_back(view(r));
    return absl::OkStatus();
  }
  // ByteLevel: an optional leading space on every piece, then GPT-2's split of each.
  CodePoints sub;
  for (const Range& r : ranges) {
    absl::string_view piece = view(r);
    if (add_prefix_space_ && piece.front() != ' ') {
      storage->push_back(absl::StrCat(" ", piece));
      piece = storage->back();
    }
    if (byte_level_regex_ == nullptr) {
      pieces->push_back(piece);
      continue;
    }
    TANDEM_RETURN_IF_ERROR(DecodeUtf8(piece, &sub));
    auto sub_view = [&](std::size_t b, std::size_t e) {
      return piece.substr(sub.offset[b], sub.offset[e] - sub.offset[b]);
    };
    scratch.clear();
    byte_level_regex_->FindAll(sub, 0, sub.size(), &scratch);
    std::size_t pos = 0;  // Isolated: gaps and matches alike become pieces
    for (const Range& m : scratch) {
      if (m.first > pos) pieces->push_back(sub_view(pos, m.first));
      pieces->push_back(sub_view(m.first, m.second));
      pos = m.second;
    }
    if (pos < sub.size()) pieces->push_back(sub_view(pos, sub.size()));
  }
  return absl::OkStatus();
}

}  // namespace tandem::tokenizer::internal
