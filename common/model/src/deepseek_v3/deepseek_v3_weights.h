#pragma once

#include <string>

#include "absl/status/status.h"
#include "tandem/model/deepseek_v3.h"

namespace tandem::model::internal {

// Hugging Face tensor name of layer `layer`'s `suffix`, e.g. "model.layers.3.mlp.gate.weight".
std::string DeepseekLayerName(int layer, const std::string& suffix);

// Sizes that must be positive and divisibility the forward relies on.
absl::Status ValidateDeepseekV3Config(const DeepseekV3Config& c);

// Every weight present with its expected shape; errors name the tensor by its Hugging Face name
// (the MTP module is checkpoint layer num_hidden_layers).
absl::Status ValidateDeepseekV3Weights(const DeepseekV3Config& c, const DeepseekV3Weights& w);

}  // namespace tandem::model::internal
