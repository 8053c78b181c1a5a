#pragma once

// The Split patterns of tokenizer.json, matched without a regex engine. Regex patterns are
// recognized by their exact source text and matched by hand-written code that reproduces the
// reference engine's (Oniguruma: leftmost match, first alternative that succeeds, greedy
// quantifiers with backtracking) result for that one pattern. A hand-written matcher is both
// faster than a general engine and free of a dependency; the cost is that an unknown pattern is
// rejected at load time (the error quotes it) until a matcher is added here.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "unicode_text.h"

namespace tandem::tokenizer::internal {

class Pattern {
 public:
  virtual ~Pattern() = default;
  // The end of the match that starts exactly at `pos` within [pos, end), or `pos` when none does.
  // Nothing past `end` is looked at (lookahead included): the reference splits each piece alone.
  virtual std::size_t MatchAt(const CodePoints& text, std::size_t pos, std::size_t end) const = 0;

  // Non-overlapping matches in [begin, end), leftmost first, as char index ranges.
  void FindAll(const CodePoints& text, std::size_t begin, std::size_t end,
               std::vector<std::pair<std::size_t, std::size_t>>* matches) const;
};

// A tokenizer.json regex; fails (naming `where`) for a pattern without a matcher.
absl::StatusOr<std::unique_ptr<Pattern>> RegexPattern(const std::string& regex,
                                                      const std::string& where);
// A literal string (tokenizer.json {"String": ...}).
std::unique_ptr<Pattern> LiteralPattern(const std::u32string& literal);
// GPT-2's pattern, used by the ByteLevel pre-tokenizer when use_regex is true.
std::unique_ptr<Pattern> Gpt2Pattern();

}  // namespace tandem::tokenizer::internal
