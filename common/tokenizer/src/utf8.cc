#include "utf8.h"

namespace tandem::tokenizer::internal {
namespace {

constexpr absl::string_view kReplacement = "\xEF\xBF\xBD";

struct LeadByte {
  int length;  // 0: cannot start a character
  unsigned char second_min;
  unsigned char second_max;
};

// Second-byte ranges exclude overlong forms, surrogates and code points past U+10FFFF.
LeadByte Classify(unsigned char c) {
  if (c < 0x80) return {1, 0, 0};
  if (c >= 0xC2 && c <= 0xDF) return {2, 0x80, 0xBF};
  if (c == 0xE0) return {3, 0xA0, 0xBF};
  if (c == 0xED) return {3, 0x80, 0x9F};
  if (c >= 0xE1 && c <= 0xEF) return {3, 0x80, 0xBF};
  if (c == 0xF0) return {4, 0x90, 0xBF};
  if (c >= 0xF1 && c <= 0xF3) return {4, 0x80, 0xBF};
  if (c == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

std::size_t AppendValidUtf8(absl::string_view in, bool final, std::string* out) {
  std::size_t i = 0;
  while (i < in.size()) {
    const LeadByte lead = Classify(static_cast<unsigned char>(in[i]));
    if (lead.length == 0) {
      out->append(kReplacement.data(), kReplacement.size());
      ++i;
      continue;
    }
    int valid = 1;  // bytes of this character seen so far that are well-formed
    while (valid < lead.length && i + valid < in.size()) {
      const auto c = static_cast<unsigned char>(in[i + valid]);
      const bool ok = valid == 1 ? c >= lead.second_min && c <= lead.second_max
                                 : c >= 0x80 && c <= 0xBF;
      if (!ok) break;
      ++valid;
    }
    if (valid == lead.length) {
      out->append(in.data() + i, valid);
    } else if (i + valid == in.size() && !final) {
      return i;  // the rest of this character may still arrive
    } else {
      out->append(kReplacement.data(), kReplacement.size());
    }
    i += valid;
  }
  return i;
}

}  // namespace tandem::tokenizer::internal
