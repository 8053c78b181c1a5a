// A tokenizer.json and a text: loading (every section: normalizer, pre-tokenizer regexes, BPE
// vocab and merges, added tokens, decoder), then encoding the text both ways, decoding the ids
// whole and one by one, and decoding ids the text's bytes spell (out-of-range ones included).
// Input: the JSON, '\0', the text.
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_util.h"
#include "tandem/tokenizer/hf_bpe_tokenizer.h"
#include "tandem/tokenizer/incremental_decoder.h"

namespace {

using tandem::tokenizer::HfBpeTokenizer;

void DecodeAll(const HfBpeTokenizer& tok, const std::vector<std::int32_t>& ids) {
  (void)tok.Decode(ids);
  tandem::tokenizer::IncrementalDecoder decoder(tok);
  for (std::int32_t id : ids) (void)decoder.Push(id);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const absl::string_view input = tandem::fuzz::AsText(data, size);
  const std::size_t split = input.find('\0');
  const absl::string_view json = input.substr(0, split);
  const absl::string_view text =
      split == absl::string_view::npos ? absl::string_view() : input.substr(split + 1);
  auto tok = HfBpeTokenizer::FromJson(json, "fuzz");
  if (!tok.ok()) return 0;
  for (std::int32_t id = 0; id < (*tok)->vocab_size(); ++id) {
    (void)(*tok)->IdToToken(id);
    (void)(*tok)->IsSpecial(id);
  }
  for (bool with_special : {false, true}) {
    auto ids = with_special ? (*tok)->EncodeWithSpecialTokens(text, true) : (*tok)->Encode(text, true);
    if (!ids.ok()) continue;
    for (std::int32_t id : *ids) {
      if (id < 0 || id >= (*tok)->vocab_size()) __builtin_trap();
    }
    DecodeAll(**tok, *ids);
  }
  std::vector<std::int32_t> raw(text.size() / sizeof(std::int32_t));
  if (!raw.empty()) std::memcpy(raw.data(), text.data(), raw.size() * sizeof(std::int32_t));
  DecodeAll(**tok, raw);
  return 0;
}
