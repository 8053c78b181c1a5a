#pragma once

// The tokenizer.json normalizer: null, Sequence, Prepend, Replace (String pattern). Unicode
// normalization forms (NFC, ...) are not supported: the DeepSeek tokenizer has none.
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hf_json_util.h"

namespace tandem::tokenizer::internal {

class Normalizer {
 public:
  static absl::StatusOr<std::unique_ptr<Normalizer>> FromJson(const Json* json);

  // True when Normalize leaves every text unchanged (so callers can skip the copy).
  bool identity() const { return steps_.empty(); }
  std::string Normalize(absl::string_view text) const;

 private:
  struct Step {
    std::string prepend;  // Prepend when `pattern` is empty
    std::string pattern;  // Replace: every non-overlapping occurrence, left to right
    std::string content;
  };
  static absl::Status AddSteps(const Json& json, const std::string& where, Normalizer* out);

  std::vector<Step> steps_;
};

}  // namespace tandem::tokenizer::internal
