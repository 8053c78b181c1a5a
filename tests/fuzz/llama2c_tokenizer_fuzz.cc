// A llama2.c tokenizer.bin and a text: loading, encoding the text, decoding every id and the
// encoded ids back. Input: a byte choosing the vocabulary size the model would claim, a 2-byte
// little-endian text length, the text, then the file.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "tandem/tokenizer/incremental_decoder.h"
#include "tandem/tokenizer/llama2c_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  // 0 reads to the end of the file; the others are what real headers claim, around the file's.
  static constexpr int kVocabSizes[] = {0, 0, 1, 3, 259, 260, 512, 32000};
  const int vocab_size = kVocabSizes[data[0] % 8];
  const std::size_t text_size = std::min<std::size_t>(data[1] | (data[2] << 8), size - 3);
  const absl::string_view text = tandem::fuzz::AsText(data + 3, text_size);
  const std::span<const std::uint8_t> file(data + 3 + text_size, size - 3 - text_size);
  auto tok = tandem::tokenizer::Llama2cTokenizer::FromBytes(file, vocab_size, "fuzz.bin");
  if (!tok.ok()) return 0;
  if (vocab_size != 0 && (*tok)->vocab_size() != vocab_size) __builtin_trap();
  for (std::int32_t id = -1; id <= (*tok)->vocab_size(); ++id) {
    (void)(*tok)->DecodeToken(tandem::tokenizer::Tokenizer::kNoToken, id);
    (void)(*tok)->DecodeToken(1, id);
  }
  auto ids = (*tok)->Encode(text, /*add_bos=*/true);
  if (!ids.ok()) return 0;
  for (std::int32_t id : *ids) {
    if (id < 0 || id >= (*tok)->vocab_size()) __builtin_trap();
  }
  tandem::tokenizer::IncrementalDecoder decoder(**tok);
  for (std::int32_t id : *ids) (void)decoder.Push(id);
  (void)decoder.Flush();
  return 0;
}
