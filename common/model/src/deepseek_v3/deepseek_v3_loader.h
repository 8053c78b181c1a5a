#pragma once

#include "absl/status/statusor.h"
#include "checkpoint/safetensors.h"
#include "tandem/model/deepseek_v3.h"

namespace tandem::model::internal {

// Maps a DeepseekV3ForCausalLM checkpoint's tensors onto the weight struct. Experts may be stored
// one matrix each (DeepSeek's release: mlp.experts.{e}.{gate,up,down}_proj.weight) or fused as
// transformers 5 saves them (mlp.experts.gate_up_proj [E, 2I, H], mlp.experts.down_proj
// [E, H, I]). The MTP module (layer num_hidden_layers) is loaded when the config asks for one and
// the checkpoint has it.
absl::StatusOr<DeepseekV3Weights> MapDeepseekV3Weights(const DeepseekV3Config& config,
                                                       const SafetensorsCheckpoint& ckpt,
                                                       bool tie_word_embeddings, bool check_finite);

}  // namespace tandem::model::internal
