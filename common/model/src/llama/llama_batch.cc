#include "llama/llama_batch.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "input_embeddings.h"
#include "tandem/base/status_macros.h"

namespace tandem::model::internal {
namespace {

absl::Status ValidateCache(const KvStorage& kv, const KvLayout& layout) {
  if (kv.base == nullptr) return absl::InvalidArgumentError("KV storage has no memory");
  if (kv.num_layers != layout.num_layers || kv.floats_per_token != layout.floats_per_token) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV storage is laid out for ", kv.num_layers, " layers x ", kv.floats_per_token,
        " floats per token; the model needs ", layout.num_layers, " x ", layout.floats_per_token));
  }
  if (kv.block_size <= 0 || kv.num_blocks <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV storage has ", kv.num_blocks, " blocks of ", kv.block_size, " tokens"));
  }
  return absl::OkStatus();
}

absl::Status ValidateChunk(std::size_t index, const SequenceChunk& chunk, const KvStorage& kv,
                           const ModelConfig& config) {
  const std::string where = absl::StrCat("batch chunk ", index, ": ");
  if (chunk.tokens.empty()) return absl::InvalidArgumentError(where + "no tokens");
  if (chunk.start_pos < 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, "negative start_pos ", chunk.start_pos));
  }
  const std::int64_t end = static_cast<std::int64_t>(chunk.start_pos) + chunk.tokens.size();
  if (end > config.max_position_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat(where, "prompt of ", end,
                                                   " tokens exceeds the context of ",
                                                   config.max_position_embeddings));
  }
  const std::int64_t blocks_needed = (end + kv.block_size - 1) / kv.block_size;
  if (static_cast<std::int64_t>(chunk.block_table.size()) < blocks_needed) {
    return absl::InvalidArgumentError(absl::StrCat(where, "block table has ",
                                                   chunk.block_table.size(), " blocks, ", end,
                                                   " tokens need ", blocks_needed));
  }
  for (std::int64_t b = 0; b < blocks_needed; ++b) {
    const std::int32_t block = chunk.block_table[b];
    if (block < 0 || block >= kv.num_blocks) {
      return absl::InvalidArgumentError(absl::StrCat(where, "block table entry ", b, " is ", block,
                                                     ", outside the pool of ", kv.num_blocks,
                                                     " blocks"));
    }
  }
  if (absl::Status st = CheckTokensAndEmbeddings(chunk, config.vocab_size); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, st.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateBatch(std::span<const SequenceChunk> batch, const KvStorage& kv,
                           const ModelConfig& config, const KvLayout& layout) {
  TANDEM_RETURN_IF_ERROR(ValidateCache(kv, layout));
  for (std::size_t i = 0; i < batch.size(); ++i) {
    TANDEM_RETURN_IF_ERROR(ValidateChunk(i, batch[i], kv, config));
  }
  return absl::OkStatus();
}

}  // namespace tandem::model::internal
