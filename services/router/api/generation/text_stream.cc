#include "api/generation/text_stream.h"

#include <algorithm>

namespace tandem::router {

TextStream::TextStream(const tokenizer::Tokenizer& tokenizer, std::int32_t prev,
                       std::vector<std::int32_t> stop_token_ids,
                       std::vector<std::string> stop_sequences)
    : decoder_(tokenizer, prev),
      stop_token_ids_(std::move(stop_token_ids)),
      stops_(std::move(stop_sequences)) {}

absl::StatusOr<std::string> TextStream::Push(std::int32_t token) {
  if (stopped()) return std::string();
  ++consumed_;
  if (std::find(stop_token_ids_.begin(), stop_token_ids_.end(), token) != stop_token_ids_.end()) {
    stopped_by_token_ = true;
    std::string out = stops_.Push(decoder_.Flush());
    return out + stops_.Flush();
  }
  token_ids_.push_back(token);
  absl::StatusOr<std::string> text = decoder_.Push(token);
  if (!text.ok()) return text.status();
  return stops_.Push(*text);
}

std::string TextStream::Finish() {
  if (stopped()) return "";
  std::string out = stops_.Push(decoder_.Flush());
  return out + stops_.Flush();
}

}  // namespace tandem::router
