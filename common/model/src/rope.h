#pragma once

#include <span>
#include <vector>

#include "tandem/model/llama.h"

namespace tandem::model::internal {

// Rotary embedding tables for one model: inverse frequencies after any scaling variant, the
// factor that multiplies cos/sin (YaRN's attention scaling), and the factor the softmax scale
// must be multiplied by (DeepSeek's YaRN mscale^2 correction; 1 elsewhere).
struct RopeTables {
  int rope_dim = 0;
  std::vector<float> inv_freq;  // rope_dim / 2
  float cos_sin_scale = 1.0f;
  float softmax_scale_factor = 1.0f;
};

RopeTables ComputeRopeTables(int rope_dim, float theta, const RopeScaling& scaling);

// cos/sin: [positions.size()][rope_dim / 2]
void FillCosSin(const RopeTables& tables, std::span<const int> positions, float* cos, float* sin);

}  // namespace tandem::model::internal
