#pragma once

#include <span>

#include "tandem/model/deepseek_v3.h"

namespace tandem::model::internal {

// DeepSeek-V3's noaux_tc routing for one token, on the host (tiny: n_routed_experts floats).
// scores = sigmoid(logits); selection uses scores + bias: keep the topk_group groups whose top-2
// biased scores sum highest, then the num_experts_per_tok best experts inside them. Weights are
// the chosen experts' unbiased scores, renormalised when norm_topk_prob, times
// routed_scaling_factor. experts/weights: num_experts_per_tok entries each.
void RouteToken(const DeepseekV3Config& config, std::span<const float> logits,
                std::span<const float> bias, std::span<int> experts, std::span<float> weights);

}  // namespace tandem::model::internal
