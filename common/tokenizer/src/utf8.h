#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace tandem::tokenizer::internal {

// Appends `in` to `out` as valid UTF-8, replacing each maximal ill-formed subsequence with U+FFFD
// (the Unicode "substitution of maximal subparts" practice). Unless `final`, an unfinished but so
// far valid character at the end is left unconsumed. Returns the number of bytes of `in` consumed.
std::size_t AppendValidUtf8(absl::string_view in, bool final, std::string* out);

}  // namespace tandem::tokenizer::internal
