#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tandem/tokenizer/tokenizer.h"

namespace tandem::tokenizer {

// The tokenizer that ships with a checkpoint, and the conventions that come with its format.
struct ModelTokenizer {
  std::unique_ptr<Tokenizer> tokenizer;
  // llama2.c models end a story by emitting BOS and never stop on EOS (what run.c does).
  bool llama2c_conventions = false;
};

// `model_path` as given to model::LoadModel: a llama2.c directory or .bin file finds
// tokenizer.bin beside model.bin; otherwise a Hugging Face tokenizer.json there loads as an
// HfBpeTokenizer (whose Encode treats added-token spellings as plain text).
absl::StatusOr<ModelTokenizer> LoadModelTokenizer(const std::string& model_path, int vocab_size);

}  // namespace tandem::tokenizer
