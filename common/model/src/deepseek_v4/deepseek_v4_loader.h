#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/safetensors.h"
#include "tandem/model/deepseek_v4.h"

namespace tandem::model::internal {

// Rejects configs the forward cannot run (sizes that do not divide, rope wider than a head...).
absl::Status ValidateDeepseekV4Config(const DeepseekV4Config& c);

// Maps a DeepseekV4ForCausalLM checkpoint as transformers saves it (DeepSeek's release names:
// model.layers.{i}.attn.wq_a, .ffn.experts.{e}.w1, ...) onto the weight struct, checking every
// shape; errors name the tensor. The hash table (ffn.gate.tid2eid) must hold integral expert ids.
absl::StatusOr<DeepseekV4Weights> MapDeepseekV4Weights(const DeepseekV4Config& c,
                                                       const SafetensorsCheckpoint& ckpt,
                                                       bool tie_word_embeddings, bool check_finite);

}  // namespace tandem::model::internal
