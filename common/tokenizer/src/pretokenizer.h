#pragma once

// The tokenizer.json pre-tokenizer: splits a text segment into the pieces BPE encodes one by one.
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hf_json_util.h"

namespace tandem::tokenizer::internal {

class Pattern;

class PreTokenizer {
 public:
  // `json`: the "pre_tokenizer" member (null: the whole segment is one piece). Supported: Sequence,
  // Split (String or supported Regex patterns; every behavior; invert), Digits, and ByteLevel as the
  // last step.
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> FromJson(const Json* json);
  ~PreTokenizer();

  // Appends the pieces of `text` (valid UTF-8) to `pieces`: views into `text`, or into strings
  // added to `storage` when ByteLevel's add_prefix_space changes a piece.
  absl::Status Split(absl::string_view text, std::vector<absl::string_view>* pieces,
                     std::deque<std::string>* storage) const;

  // Whether a ByteLevel step is present, i.e. the model's vocabulary is byte-level text.
  bool byte_level() const { return byte_level_; }

 private:
  struct Step;
  PreTokenizer();
  static absl::Status AddSteps(const Json& json, const std::string& where, PreTokenizer* out);

  std::vector<std::unique_ptr<Step>> steps_;
  bool byte_level_ = false;
  bool add_prefix_space_ = false;
  std::unique_ptr<Pattern> byte_level_regex_;  // null when use_regex is false
};

}  // namespace tandem::tokenizer::internal
