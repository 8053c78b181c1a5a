#pragma once

#include <span>
#include <vector>

#include "rope.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/deepseek_v3.h"

namespace tandem::model::internal {

// Where one chunk's rows sit in the flattened batch and in its cache.
struct MlaChunk {
  int row = 0;          // first row in the batch's activations
  int n = 0;            // rows
  int cache_start = 0;  // cache slot of the first row
  kernels::PagedKvLayer kv;
};

// W_UK of every head transposed ([kv_lora_rank][qk_nope_head_dim]), derived once at load for the
// absorbed query q_latent = W_UK^T q_nope.
struct MlaAbsorbedWeights {
  std::vector<std::vector<float>> uk_t;
};

// Multi-head latent attention of one layer. The cache row of a token is
// [kv_a_layernorm(latent) | rope(k_rope)]; the absorbed form scores queries against the latent
// directly (Backend::MlaAttention), the naive form expands per-head K/V with kv_b_proj.
class MlaAttention {
 public:
  MlaAttention(const DeepseekV3Config& config, bool absorbed, kernels::Backend* backend);

  MlaAbsorbedWeights PrepareAbsorbed(const DeepseekV3LayerWeights& layer) const;

  // in: [T][hidden] (normalised); writes every row's cache entry at its chunk's slots, then
  // out: [T][hidden]. positions: each row's rotary position.
  void Forward(const DeepseekV3LayerWeights& l, const MlaAbsorbedWeights& absorbed,
               std::span<const MlaChunk> chunks, std::span<const int> positions, const float* in,
               int T, float* out) const;

 private:
  void Absorbed(const DeepseekV3LayerWeights& l, const MlaAbsorbedWeights& absorbed,
                std::span<const MlaChunk> chunks, const std::vector<float>& q, int T,
                float* o) const;
  void Naive(const DeepseekV3LayerWeights& l, const MlaChunk& c, const float* q, float* o) const;

  const DeepseekV3Config& cfg_;
  bool absorbed_;
  kernels::Backend* be_;
  RopeTables rope_;
  float softmax_scale_ = 1.0f;
};

}  // namespace tandem::model::internal
