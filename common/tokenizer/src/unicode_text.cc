#include "unicode_text.h"

#include <algorithm>
#include <array>
#include <memory>
#include <span>
#include <string>

#include "absl/strings/str_cat.h"

namespace tandem::tokenizer::internal {
namespace {

struct CodePointRange {
  char32_t first;
  char32_t last;
};

#include "unicode_tables.inc"

constexpr char32_t kBmpSize = 0x10000;

bool InRanges(std::span<const CodePointRange> ranges, char32_t cp) {
  const auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                                   [](char32_t c, const CodePointRange& r) { return c < r.first; });
  return it != ranges.begin() && cp <= std::prev(it)->last;
}

std::uint8_t ClassFromRanges(char32_t cp) {
  std::uint8_t cls = 0;
  if (InRanges(kLetter, cp)) cls |= kClassLetter;
  if (InRanges(kMark, cp)) cls |= kClassMark;
  if (InRanges(kNumber, cp)) cls |= kClassNumber;
  if (InRanges(kPunctuation, cp)) cls |= kClassPunctuation;
  if (InRanges(kSymbol, cp)) cls |= kClassSymbol;
  if (InRanges(kWhiteSpace, cp)) cls |= kClassWhiteSpace;
  return cls;
}

// The Basic Multilingual Plane by direct lookup (nearly all text); the rest by binary search.
const std::array<std::uint8_t, kBmpSize>& BmpClasses() {
  static const auto* const table = [] {
    auto* t = new std::array<std::uint8_t, kBmpSize>();
    for (char32_t cp = 0; cp < kBmpSize; ++cp) (*t)[cp] = ClassFromRanges(cp);
    return t;
  }();
  return *table;
}

}  // namespace

std::uint8_t CharClass(char32_t cp) {
  return cp < kBmpSize ? BmpClasses()[cp] : ClassFromRanges(cp);
}

absl::Status DecodeUtf8(absl::string_view text, CodePoints* out) {
  if (out != nullptr) {
    out->cp.clear();
    out->cls.clear();
    out->offset.clear();
    out->cp.reserve(text.size());
    out->cls.reserve(text.size());
    out->offset.reserve(text.size() + 1);
  }
  const auto& bmp = BmpClasses();
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    char32_t cp;
    int len;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c < 0x80) {
      cp = c;
      len = 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
      cp = c & 0x1F;
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      cp = c & 0x0F;
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      cp = c & 0x07;
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // past U+10FFFF
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("text is not valid UTF-8: byte ", i, " (0x", absl::Hex(c),
                       ") cannot start a character"));
    }
    if (i + len > n) {
      return absl::InvalidArgumentError(
          absl::StrCat("text is not valid UTF-8: character at byte ", i, " is truncated"));
    }
    for (int k = 1; k < len; ++k) {
      const unsigned char b = s[i + k];
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "text is not valid UTF-8: bad continuation byte 0x", absl::Hex(b), " at byte ", i + k));
      }
      cp = (cp << 6) | (b & 0x3F);
    }
    if (out != nullptr) {
      out->cp.push_back(cp);
      out->cls.push_back(cp < kBmpSize ? bmp[cp] : ClassFromRanges(cp));
      out->offset.push_back(static_cast<std::uint32_t>(i));
    }
    i += len;
  }
  if (out != nullptr) out->offset.push_back(static_cast<std::uint32_t>(n));
  return absl::OkStatus();
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace tandem::tokenizer::internal
