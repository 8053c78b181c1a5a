#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tandem/kernels/attention_params.h"

namespace tandem::model {

enum class Architecture : std::uint8_t { kLlama, kDeepseekV3, kDeepseekV4 };

// What every consumer of a model (engine, services, router) needs to know, whatever the
// architecture. Architecture details stay in the architecture's own config struct.
struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  std::string name;  // served model name
  int vocab_size = 0;
  int hidden_size = 0;
  int num_layers = 0;
  int max_position_embeddings = 0;  // context limit
  int bos_token_id = 1;
  int eos_token_id = 2;
};

// Floats one token occupies in one layer of the paged KV cache: 2 * kv_heads * head_dim for
// GQA models, kv_lora_rank + rope_dim (latent + shared rope key) for MLA models.
struct KvLayout {
  int num_layers = 0;
  int floats_per_token = 0;
};

// A paged KV pool as the model sees it: num_blocks blocks, each holding every layer's rows for
// block_size consecutive tokens. Layout: [block][layer][slot][floats_per_token], so one block is
// one contiguous range (what a KV transfer or a tier demotion moves).
struct KvStorage {
  float* base = nullptr;
  int num_blocks = 0;
  int block_size = 0;
  int num_layers = 0;
  int floats_per_token = 0;

  std::int64_t layer_stride() const {
    return static_cast<std::int64_t>(block_size) * floats_per_token;
  }
  std::int64_t block_stride() const { return layer_stride() * num_layers; }
  std::int64_t block_floats() const { return block_stride(); }

  kernels::PagedKvLayer Layer(int layer, std::span<const std::int32_t> block_table) const {
    kernels::PagedKvLayer v;
    v.layer_base = base + layer * layer_stride();
    v.block_stride = block_stride();
    v.token_stride = floats_per_token;
    v.block_size = block_size;
    v.block_table = block_table.data();
    v.num_blocks = static_cast<int>(block_table.size());
    return v;
  }
};

enum class LogitsMode : std::uint8_t { kNone, kLast, kAll };

// Rows that stand in for token embeddings (an image's rows from the vision encoder): tokens
// [first, first + rows) of the chunk take data's rows, hidden_size floats each, instead of the
// embedding table's. Those tokens' ids are placeholders (negative ids are allowed there only):
// they name the image for prefix caching, never a vocabulary entry.
struct InputEmbeddings {
  int first = 0;
  int rows = 0;
  const float* data = nullptr;
  // The id the model sees at these positions wherever it reads ids past the embedding (V4's
  // hash-routed experts): the image placeholder token.
  std::int32_t token_id = 0;
};

// One sequence's slice of a forward batch: a prefill chunk or a single decode token.
struct SequenceChunk {
  std::span<const std::int32_t> tokens;
  int start_pos = 0;  // position of tokens[0]; the cache already holds positions [0, start_pos)
  std::span<const std::int32_t> block_table;  // covers at least start_pos + tokens.size() tokens
  LogitsMode logits = LogitsMode::kLast;
  std::span<const InputEmbeddings> embeddings;  // disjoint, in order, inside tokens
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual KvLayout kv_layout() const = 0;

  // One forward pass over every chunk of the batch: writes each token's KV into `kv` and appends
  // to `logits` vocab_size floats per requested row, in chunk order (kLast: one row, kAll: one
  // per token, kNone: none). Results for a chunk do not depend on the rest of the batch.
  virtual absl::Status Forward(std::span<const SequenceChunk> batch, const KvStorage& kv,
                               std::vector<float>* logits) = 0;
};

}  // namespace tandem::model
