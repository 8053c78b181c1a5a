#include "input_embeddings.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tandem::model::internal {

absl::Status CheckTokensAndEmbeddings(const SequenceChunk& chunk, int vocab_size) {
  const int n = static_cast<int>(chunk.tokens.size());
  int next_free = 0;  // first token not covered by an earlier span
  for (const InputEmbeddings& e : chunk.embeddings) {
    if (e.rows <= 0 || e.first < next_free || e.first + e.rows > n || e.data == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input embeddings [", e.first, ", ", e.first + e.rows, ") do not fit a chunk of ", n,
          " tokens in order, or have no data"));
    }
    if (e.token_id < 0 || e.token_id >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("input embeddings stand for token id ",
                                                     e.token_id, ", outside the vocabulary"));
    }
    next_free = e.first + e.rows;
  }
  std::size_t span = 0;
  for (int t = 0; t < n; ++t) {
    while (span < chunk.embeddings.size() &&
           chunk.embeddings[span].first + chunk.embeddings[span].rows <= t) {
      ++span;
    }
    const bool covered = span < chunk.embeddings.size() && chunk.embeddings[span].first <= t;
    if (!covered && (chunk.tokens[t] < 0 || chunk.tokens[t] >= vocab_size)) {
      return absl::InvalidArgumentError(absl::StrCat("token ", t, " has id ", chunk.tokens[t],
                                                     ", outside the vocabulary [0, ", vocab_size,
                                                     ")"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::int32_t> ModelTokens(const SequenceChunk& chunk) {
  std::vector<std::int32_t> ids(chunk.tokens.begin(), chunk.tokens.end());
  for (const InputEmbeddings& e : chunk.embeddings) {
    std::fill_n(ids.begin() + e.first, e.rows, e.token_id);
  }
  return ids;
}

void EmbedChunk(kernels::Backend& backend, const kernels::WeightView& table,
                const SequenceChunk& chunk, int hidden, float* out) {
  const auto n = static_cast<std::int64_t>(chunk.tokens.size());
  if (chunk.embeddings.empty()) {
    backend.Embed(table, chunk.tokens.data(), n, out);
    return;
  }
  // Placeholder ids are not table rows: look the spans' token up there, then overwrite the rows.
  const std::vector<std::int32_t> ids = ModelTokens(chunk);
  backend.Embed(table, ids.data(), n, out);
  for (const InputEmbeddings& e : chunk.embeddings) {
    std::copy_n(e.data, static_cast<std::size_t>(e.rows) * hidden,
                out + static_cast<std::size_t>(e.first) * hidden);
  }
}

}  // namespace tandem::model::internal
