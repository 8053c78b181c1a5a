#include "byte_level.h"

#include <algorithm>
#include <array>

#include "unicode_text.h"

namespace tandem::tokenizer::internal {
namespace {

bool StandsForItself(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Alphabet {
  std::array<char32_t, 256> byte_to_char;
  std::array<std::string, 256> byte_to_utf8;
  std::array<int, 512> char_to_byte;  // every stand-in is below U+0200; -1: not in the alphabet
};

const Alphabet& GetAlphabet() {
  static const Alphabet* const alphabet = [] {
    auto* a = new Alphabet();
    a->char_to_byte.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const char32_t c = StandsForItself(b) ? static_cast<char32_t>(b) : next++;
      a->byte_to_char[b] = c;
      AppendUtf8(c, &a->byte_to_utf8[b]);
      a->char_to_byte[c] = b;
    }
    return a;
  }();
  return *alphabet;
}

}  // namespace

char32_t ByteLevelChar(unsigned char byte) { return GetAlphabet().byte_to_char[byte]; }

void AppendByteLevel(absl::string_view bytes, std::string* out) {
  const Alphabet& a = GetAlphabet();
  for (const char c : bytes) out->append(a.byte_to_utf8[static_cast<unsigned char>(c)]);
}

std::string ByteLevelToBytes(absl::string_view text, bool* all_in_alphabet) {
  const Alphabet& a = GetAlphabet();
  std::string out;
  bool all = true;
  std::size_t i = 0;
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  while (i < text.size()) {
    const unsigned char c = s[i];
    const int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < len && i + k < text.size(); ++k) cp = (cp << 6) | (s[i + k] & 0x3F);
    const int byte = cp < a.char_to_byte.size() ? a.char_to_byte[cp] : -1;
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
    } else {
      all = false;
      out.append(text.data() + i, std::min<std::size_t>(len, text.size() - i));
    }
    i += len;
  }
  if (all_in_alphabet != nullptr) *all_in_alphabet = all;
  return out;
}

}  // namespace tandem::tokenizer::internal
