#pragma once

// GPT-2's byte-level alphabet: every byte stands for a printable character, so BPE vocabularies
// can be stored as text ("Ġthe" is " the"). Bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF stand for
// the code point of the same value; the others, in order, for U+0100 upwards.
#include <string>

#include "absl/strings/string_view.h"

namespace tandem::tokenizer::internal {

char32_t ByteLevelChar(unsigned char byte);

// Appends the byte-level text of `bytes`.
void AppendByteLevel(absl::string_view bytes, std::string* out);

// The bytes a byte-level token stands for. Characters outside the alphabet are kept as their own
// UTF-8 (what the reference decoder does); `all_in_alphabet` (optional) says whether there were
// none. `text` must be valid UTF-8.
std::string ByteLevelToBytes(absl::string_view text, bool* all_in_alphabet = nullptr);

}  // namespace tandem::tokenizer::internal
