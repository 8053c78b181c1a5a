// Arbitrary bytes through a fixed DeepSeek-style tokenizer (byte_tokenizer.h), as client text
// reaches it: invalid UTF-8 must be an error, and valid text must decode back to itself (the
// tokenizer has no normalizer, so encoding loses nothing).
#include <cstdint>
#include <string>

#include "byte_tokenizer.h"
#include "fuzz_util.h"
#include "tandem/tokenizer/incremental_decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto& tok = tandem::fuzz::ByteTokenizer();
  const absl::string_view text = tandem::fuzz::AsText(data, size);
  auto ids = tok.Encode(text, /*add_bos=*/false);
  if (!ids.ok()) return 0;
  auto decoded = tok.Decode(*ids);
  if (!decoded.ok() || *decoded != text) __builtin_trap();
  // Streaming decode holds back partial characters but must end with the same bytes.
  tandem::tokenizer::IncrementalDecoder decoder(tok);
  std::string streamed;
  for (std::int32_t id : *ids) {
    auto piece = decoder.Push(id);
    if (!piece.ok()) __builtin_trap();
    streamed += *piece;
  }
  streamed += decoder.Flush();
  if (streamed != text) __builtin_trap();
  (void)tok.EncodeWithSpecialTokens(text, /*add_bos=*/true);
  return 0;
}
