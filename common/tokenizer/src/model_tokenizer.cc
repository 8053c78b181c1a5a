#include "tandem/tokenizer/model_tokenizer.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "tandem/tokenizer/hf_bpe_tokenizer.h"
#include "tandem/tokenizer/llama2c_tokenizer.h"

namespace tandem::tokenizer {

absl::StatusOr<ModelTokenizer> LoadModelTokenizer(const std::string& model_path, int vocab_size) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path path(model_path);
  const fs::path dir = fs::is_directory(path, ec) ? path : path.parent_path();
  const fs::path llama2c = dir / "tokenizer.bin";
  if (fs::exists(llama2c, ec)) {
    auto tok = Llama2cTokenizer::Load(llama2c.string(), vocab_size);
    if (!tok.ok()) return tok.status();
    return ModelTokenizer{std::move(*tok), true};
  }
  const fs::path hf = dir / "tokenizer.json";
  if (fs::exists(hf, ec)) {
    auto tok = HfBpeTokenizer::Load(hf.string());
    if (!tok.ok()) return tok.status();
    // Ids past the model's embedding table would index out of it.
    if (vocab_size > 0 && (*tok)->vocab_size() > vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          hf.string(), " has ids up to ", (*tok)->vocab_size() - 1, " but the model's vocabulary ",
          "has ", vocab_size, " entries"));
    }
    return ModelTokenizer{std::move(*tok), false};
  }
  return absl::NotFoundError(
      absl::StrCat("no tokenizer.bin or tokenizer.json beside the model in ", dir.string()));
}

}  // namespace tandem::tokenizer
