#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/generation/stop_matcher.h"
#include "tandem/tokenizer/incremental_decoder.h"
#include "tandem/tokenizer/tokenizer.h"

namespace tandem::router {

// Generated token ids -> the text a client sees: UTF-8-safe incremental detokenisation, stop
// token ids dropped (they end generation but are not part of the output), stop sequences cut.
class TextStream {
 public:
  // `prev`: the last prompt token. `tokenizer` must outlive this object.
  TextStream(const tokenizer::Tokenizer& tokenizer, std::int32_t prev,
             std::vector<std::int32_t> stop_token_ids, std::vector<std::string> stop_sequences);

  // Text that became final with `token` (possibly empty). Ignores tokens once stopped().
  absl::StatusOr<std::string> Push(std::int32_t token);
  // The rest, once the generation ended.
  std::string Finish();

  // A stop token or stop sequence ended the output.
  bool stopped() const { return stopped_by_token_ || stops_.stopped(); }
  // The ids behind the output: every generated id up to the stop, stop token ids excluded.
  const std::vector<std::int32_t>& token_ids() const { return token_ids_; }
  // Tokens the output used: up to and including the one that stopped it.
  std::size_t consumed() const { return consumed_; }

 private:
  tokenizer::IncrementalDecoder decoder_;
  std::vector<std::int32_t> stop_token_ids_;
  StopMatcher stops_;
  bool stopped_by_token_ = false;
  std::vector<std::int32_t> token_ids_;
  std::size_t consumed_ = 0;
};

}  // namespace tandem::router
