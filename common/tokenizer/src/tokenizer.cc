#include "tandem/tokenizer/tokenizer.h"

#include "tandem/base/status_macros.h"

namespace tandem::tokenizer {

absl::StatusOr<std::string> Tokenizer::Decode(std::span<const std::int32_t> ids) const {
  std::string text;
  std::int32_t prev = kNoToken;
  for (const std::int32_t id : ids) {
    TANDEM_ASSIGN_OR_RETURN(std::string piece, DecodeToken(prev, id));
    text += piece;
    prev = id;
  }
  return text;
}

}  // namespace tandem::tokenizer
