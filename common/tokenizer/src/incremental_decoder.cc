#include "tandem/tokenizer/incremental_decoder.h"

#include "tandem/base/status_macros.h"
#include "utf8.h"

namespace tandem::tokenizer {

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, std::int32_t prev)
    : tokenizer_(tokenizer), prev_(prev) {}

absl::StatusOr<std::string> IncrementalDecoder::Push(std::int32_t token) {
  TANDEM_ASSIGN_OR_RETURN(std::string bytes, tokenizer_.DecodeToken(prev_, token));
  prev_ = token;
  pending_ += bytes;
  std::string text;
  const std::size_t consumed = internal::AppendValidUtf8(pending_, /*final=*/false, &text);
  pending_.erase(0, consumed);
  return text;
}

std::string IncrementalDecoder::Flush() {
  std::string text;
  internal::AppendValidUtf8(pending_, /*final=*/true, &text);
  pending_.clear();
  return text;
}

}  // namespace tandem::tokenizer
