#pragma once

// tokenizer.json "added_tokens": spellings that are cut out of the text before pre-tokenization
// and become their own id.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace tandem::tokenizer::internal {

struct AddedToken {
  std::int32_t id = -1;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

// A part of the text: an added token (id >= 0, `text` is what it consumed) or text to encode.
struct Segment {
  std::int32_t id;
  absl::string_view text;
};

class AddedTokenMatcher {
 public:
  // `normalized`: whether this matcher holds the tokens matched against normalized text (the
  // reference's second pass) or against the original text (its first pass).
  AddedTokenMatcher(const std::vector<AddedToken>& tokens, bool normalized);

  // Splits `text` at the added tokens, the reference's way: leftmost-longest matches over all
  // tokens; a match is then dropped (left as text) when it is special and `skip_special`, or when
  // single_word fails; lstrip/rstrip widen it over neighbouring whitespace.
  void Split(absl::string_view text, bool skip_special, std::vector<Segment>* out) const;

  bool empty() const { return tokens_.empty(); }

 private:
  // Index of the longest token spelled at text[pos...], or -1.
  int LongestAt(absl::string_view text, std::size_t pos) const;

  std::vector<AddedToken> tokens_;
  // Byte trie: edges keyed by (node << 8 | byte); terminal_[node] is a token index or -1.
  absl::flat_hash_map<std::uint64_t, std::uint32_t> edges_;
  std::vector<int> terminal_;
  bool first_byte_[256] = {};
};

}  // namespace tandem::tokenizer::internal
