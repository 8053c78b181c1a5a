#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "tandem/tokenizer/tokenizer.h"

namespace tandem::tokenizer {

// Streaming detokenizer: turns generated tokens into text one token at a time and never emits part
// of a UTF-8 character (a character whose bytes arrive as several byte-fallback tokens is held
// back until complete). Every string it returns is valid UTF-8; bytes that can never form a valid
// character are replaced by U+FFFD.
//
//   IncrementalDecoder dec(tok, /*prev=*/prompt_ids.back());
//   for (int32_t id : generated) { TANDEM_ASSIGN_OR_RETURN(std::string s, dec.Push(id)); out += s; }
//   out += dec.Flush();
class IncrementalDecoder {
 public:
  // `prev`: the token before the first pushed one (the last prompt token, or Tokenizer::kNoToken),
  // since how a token decodes can depend on its predecessor. `tokenizer` must outlive this object.
  explicit IncrementalDecoder(const Tokenizer& tokenizer,
                              std::int32_t prev = Tokenizer::kNoToken);

  // Text that became complete with this token (possibly empty).
  absl::StatusOr<std::string> Push(std::int32_t token);

  // Ends the stream: an unfinished character left over becomes U+FFFD.
  std::string Flush();

  // Bytes held back waiting for the rest of a character.
  std::size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  std::int32_t prev_;
  std::string pending_;
};

}  // namespace tandem::tokenizer
