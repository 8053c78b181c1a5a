#include "hf_added_tokens.h"

#include "unicode_text.h"

namespace tandem::tokenizer::internal {
namespace {

// The code point that ends just before `end` / starts at `pos` (text is valid UTF-8).
char32_t CodePointBefore(absl::string_view text, std::size_t end, std::size_t* start) {
  std::size_t s = end - 1;
  while (s > 0 && (static_cast<unsigned char>(text[s]) & 0xC0) == 0x80) --s;
  CodePoints cps;
  (void)DecodeUtf8(text.substr(s, end - s), &cps);
  *start = s;
  return cps.size() == 1 ? cps.cp[0] : 0;
}

char32_t CodePointAt(absl::string_view text, std::size_t pos, std::size_t* len) {
  const auto c = static_cast<unsigned char>(text[pos]);
  *len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  CodePoints cps;
  (void)DecodeUtf8(text.substr(pos, *len), &cps);
  return cps.size() == 1 ? cps.cp[0] : 0;
}

bool IsSpace(char32_t c) { return CharClass(c) & kClassWhiteSpace; }
bool IsWordChar(char32_t c) {
  return c == '_' || (CharClass(c) & (kClassLetter | kClassMark | kClassNumber));
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens, bool normalized) {
  terminal_.push_back(-1);
  for (const AddedToken& t : tokens) {
    if (t.normalized != normalized || t.content.empty()) continue;
    const int index = static_cast<int>(tokens_.size());
    tokens_.push_back(t);
    std::uint32_t node = 0;
    for (const char c : t.content) {
      const std::uint64_t key = std::uint64_t{node} << 8 | static_cast<unsigned char>(c);
      auto [it, inserted] = edges_.try_emplace(key, static_cast<std::uint32_t>(terminal_.size()));
      if (inserted) terminal_.push_back(-1);
      node = it->second;
    }
    // A spelling given twice keeps its first entry.
    if (terminal_[node] < 0) terminal_[node] = index;
    first_byte_[static_cast<unsigned char>(t.content[0])] = true;
  }
}

int AddedTokenMatcher::LongestAt(absl::string_view text, std::size_t pos) const {
  int best = -1;
  std::uint32_t node = 0;
  for (std::size_t i = pos; i < text.size(); ++i) {
    const auto it = edges_.find(std::uint64_t{node} << 8 | static_cast<unsigned char>(text[i]));
    if (it == edges_.end()) break;
    node = it->second;
    if (terminal_[node] >= 0) best = terminal_[node];
  }
  return best;
}

void AddedTokenMatcher::Split(absl::string_view text, bool skip_special,
                              std::vector<Segment>* out) const {
  std::size_t emitted = 0;  // text before this is already in `out`
  std::size_t pos = 0;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    const int index = LongestAt(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[index];
    std::size_t start = pos;
    std::size_t stop = pos + token.content.size();
    pos = stop;  // a dropped match is still consumed, as in the reference's match iteration
    if (skip_special && token.special) continue;
    if (token.single_word) {
      std::size_t unused;
      const bool word_before = start > 0 && IsWordChar(CodePointBefore(text, start, &unused));
      const bool word_after = stop < text.size() && IsWordChar(CodePointAt(text, stop, &unused));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) {
      while (start > emitted) {
        std::size_t s;
        if (!IsSpace(CodePointBefore(text, start, &s))) break;
        start = s;
      }
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        std::size_t len;
        if (!IsSpace(CodePointAt(text, stop, &len))) break;
        stop += len;
      }
      pos = stop;
    }
    if (start > emitted) out->push_back({-1, text.substr(emitted, start - emitted)});
    out->push_back({token.id, text.substr(start, stop - start)});
    emitted = stop;
  }
  if (emitted < text.size()) out->push_back({-1, text.substr(emitted)});
}

}  // namespace tandem::tokenizer::internal
