#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/model.h"

namespace tandem::model::internal {

// The chunk's input embeddings lie inside its tokens, in order, without overlap, with data;
// every token they do not cover is in [0, vocab_size).
absl::Status CheckTokensAndEmbeddings(const SequenceChunk& chunk, int vocab_size);

// The ids the model computes with: the chunk's tokens, with each input span's token_id in place
// of its placeholders.
std::vector<std::int32_t> ModelTokens(const SequenceChunk& chunk);

// Embeds the chunk's tokens into out (tokens x hidden): table rows for ordinary tokens, the
// chunk's input rows where it has them.
void EmbedChunk(kernels::Backend& backend, const kernels::WeightView& table,
                const SequenceChunk& chunk, int hidden, float* out);

}  // namespace tandem::model::internal
