#pragma once

// Unicode classes for the pre-tokenizer patterns, and UTF-8 text decoded to code points.
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tandem::tokenizer::internal {

// Bits of CharClass(): the general-category groups \p{L}, \p{M}, \p{N}, \p{P}, \p{S} and
// White_Space (\s), as the reference's regex engine (Oniguruma, Unicode 16.0) defines them.
enum : std::uint8_t {
  kClassLetter = 1,
  kClassMark = 2,
  kClassNumber = 4,
  kClassPunctuation = 8,
  kClassSymbol = 16,
  kClassWhiteSpace = 32,
};

std::uint8_t CharClass(char32_t cp);

// A UTF-8 text as code points: cp[i] starts at byte offset[i]; offset[size()] is the byte length.
struct CodePoints {
  std::vector<char32_t> cp;
  std::vector<std::uint8_t> cls;  // CharClass(cp[i])
  std::vector<std::uint32_t> offset;
  std::size_t size() const { return cp.size(); }
};

// Fails on ill-formed UTF-8 (overlong forms, surrogates, truncated characters, stray bytes) with
// the byte offset of the first bad byte. `out` may be null to only validate.
absl::Status DecodeUtf8(absl::string_view text, CodePoints* out);

// Appends the UTF-8 encoding of `cp`.
void AppendUtf8(char32_t cp, std::string* out);

}  // namespace tandem::tokenizer::internal
