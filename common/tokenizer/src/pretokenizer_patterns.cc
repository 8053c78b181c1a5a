#include "pretokenizer_patterns.h"

#include "absl/strings/str_cat.h"
#include "hf_json_util.h"

namespace tandem::tokenizer::internal {
namespace {

bool IsCrLf(char32_t c) { return c == '\r' || c == '\n'; }
bool IsAsciiLetter(char32_t c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
bool IsAsciiPunct(char32_t c) {
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
         (c >= '{' && c <= '~');
}

// Index just past the run of chars starting at `pos` (before `end`) whose class has `bits`.
std::size_t RunOf(const CodePoints& t, std::size_t pos, std::size_t end, std::uint8_t bits) {
  while (pos < end && (t.cls[pos] & bits)) ++pos;
  return pos;
}

// `\s+(?!\S)|\s+` from `pos`: a whitespace run, less its last char when a non-space follows and
// the run is longer than one (backtracking so that the lookahead sees whitespace).
std::size_t TrailingSpaceRun(const CodePoints& t, std::size_t pos, std::size_t end) {
  const std::size_t q = RunOf(t, pos, end, kClassWhiteSpace);
  if (q == pos) return pos;
  return q == end || q - pos == 1 ? q : q - 1;
}

// \p{N}{1,3}
class DigitGroups final : public Pattern {
 public:
  std::size_t MatchAt(const CodePoints& t, std::size_t pos, std::size_t end) const override {
    std::size_t e = pos;
    while (e < end && e - pos < 3 && (t.cls[e] & kClassNumber)) ++e;
    return e;
  }
};

// [一-龥぀-ゟ゠-ヿ]+ : CJK unified ideographs U+4E00-U+9FA5, hiragana, katakana.
class CjkKanaRun final : public Pattern {
 public:
  std::size_t MatchAt(const CodePoints& t, std::size_t pos, std::size_t end) const override {
    std::size_t e = pos;
    while (e < end && InSet(t.cp[e])) ++e;
    return e;
  }

 private:
  static bool InSet(char32_t c) {
    return (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x3040 && c <= 0x309F) ||
           (c >= 0x30A0 && c <= 0x30FF);
  }
};

// DeepSeek's word pattern, alternatives in order:
//   A1 [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+
//   A2 [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
//   A3  ?[\p{P}\p{S}]+[\r\n]*
//   A4 \s*[\r\n]+
//   A5 \s+(?!\S)
//   A6 \s+
class DeepSeekWords final : public Pattern {
 public:
  std::size_t MatchAt(const CodePoints& t, std::size_t pos, std::size_t end) const override {
    const char32_t c0 = t.cp[pos];
    const std::uint8_t k0 = t.cls[pos];
    const bool has_next = pos + 1 < end;
    // A1: the letter run is greedy and nothing follows it in the alternative.
    if (IsAsciiPunct(c0) && has_next && IsAsciiLetter(t.cp[pos + 1])) {
      std::size_t e = pos + 2;
      while (e < end && IsAsciiLetter(t.cp[e])) ++e;
      return e;
    }
    // A2: with the optional lead char if it qualifies and a letter/mark follows, else without.
    constexpr std::uint8_t kLM = kClassLetter | kClassMark;
    if (!IsCrLf(c0) && !(k0 & (kClassLetter | kClassPunctuation | kClassSymbol)) && has_next &&
        (t.cls[pos + 1] & kLM)) {
      return RunOf(t, pos + 2, end, kLM);
    }
    if (k0 & kLM) return RunOf(t, pos + 1, end, kLM);
    // A3
    constexpr std::uint8_t kPS = kClassPunctuation | kClassSymbol;
    std::size_t s = pos;
    if (c0 == ' ' && has_next && (t.cls[pos + 1] & kPS)) s = pos + 1;
    if (t.cls[s] & kPS) {
      std::size_t e = RunOf(t, s + 1, end, kPS);
      while (e < end && IsCrLf(t.cp[e])) ++e;
      return e;
    }
    if (!(k0 & kClassWhiteSpace)) return pos;
    // A4: \s* backtracks to the last CR/LF of the whitespace run; [\r\n]+ then ends right after it.
    const std::size_t q = RunOf(t, pos, end, kClassWhiteSpace);
    for (std::size_t k = q; k > pos; --k) {
      if (IsCrLf(t.cp[k - 1])) return k;
    }
    return TrailingSpaceRun(t, pos, end);  // A5, A6
  }
};

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
class Gpt2Words final : public Pattern {
 public:
  std::size_t MatchAt(const CodePoints& t, std::size_t pos, std::size_t end) const override {
    const char32_t c0 = t.cp[pos];
    if (c0 == '\'' && pos + 1 < end) {
      const char32_t c1 = t.cp[pos + 1];
      if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return pos + 2;
      if (pos + 2 < end) {
        const char32_t c2 = t.cp[pos + 2];
        if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
          return pos + 3;
        }
      }
    }
    const std::size_t s = c0 == ' ' && pos + 1 < end ? pos + 1 : pos;
    for (const std::size_t start : {s, pos}) {
      const std::uint8_t k = t.cls[start];
      if (k & kClassLetter) return RunOf(t, start + 1, end, kClassLetter);
      if (k & kClassNumber) return RunOf(t, start + 1, end, kClassNumber);
      if (!(k & (kClassWhiteSpace | kClassLetter | kClassNumber))) {
        std::size_t e = start + 1;
        while (e < end && !(t.cls[e] & (kClassWhiteSpace | kClassLetter | kClassNumber))) ++e;
        return e;
      }
    }
    return TrailingSpaceRun(t, pos, end);
  }
};

class Literal final : public Pattern {
 public:
  explicit Literal(std::u32string literal) : literal_(std::move(literal)) {}
  std::size_t MatchAt(const CodePoints& t, std::size_t pos, std::size_t end) const override {
    if (literal_.empty() || end - pos < literal_.size()) return pos;
    for (std::size_t i = 0; i < literal_.size(); ++i) {
      if (t.cp[pos + i] != literal_[i]) return pos;
    }
    return pos + literal_.size();
  }

 private:
  std::u32string literal_;
};

}  // namespace

void Pattern::FindAll(const CodePoints& text, std::size_t begin, std::size_t end,
                      std::vector<std::pair<std::size_t, std::size_t>>* matches) const {
  std::size_t pos = begin;
  while (pos < end) {
    const std::size_t e = MatchAt(text, pos, end);
    if (e > pos) {
      matches->emplace_back(pos, e);
      pos = e;
    } else {
      ++pos;
    }
  }
}

absl::StatusOr<std::unique_ptr<Pattern>> RegexPattern(const std::string& regex,
                                                      const std::string& where) {
  if (regex == R"(\p{N}{1,3})") return std::make_unique<DigitGroups>();
  if (regex == "[一-龥぀-ゟ゠-ヿ]+") return std::make_unique<CjkKanaRun>();
  if (regex == "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
               "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+") {
    return std::make_unique<DeepSeekWords>();
  }
  if (regex == R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)") {
    return Gpt2Pattern();
  }
  return FieldError(where, absl::StrCat("regex '", regex,
                                        "' has no matcher (supported: the DeepSeek-V4 and "
                                        "GPT-2 pre-tokenizer patterns)"));
}

std::unique_ptr<Pattern> LiteralPattern(const std::u32string& literal) {
  return std::make_unique<Literal>(literal);
}

std::unique_ptr<Pattern> Gpt2Pattern() { return std::make_unique<Gpt2Words>(); }

}  // namespace tandem::tokenizer::internal
