#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "tandem/base/mapped_file.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/llama.h"
#include "tandem/model/model.h"

namespace tandem::model {

// DeepSeek-V3 (DeepseekV3ForCausalLM): multi-head latent attention + sigmoid-gated MoE with
// group-limited routing, optional multi-token-prediction (MTP) layer.
struct DeepseekV3Config {
  ModelConfig base;
  int intermediate_size = 0;      // dense layers
  int moe_intermediate_size = 0;  // each routed expert; shared experts are n_shared_experts wide
  int num_heads = 0;
  int q_lora_rank = 0;  // 0: a single q_proj
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  int n_routed_experts = 0;
  int n_shared_experts = 0;
  int num_experts_per_tok = 0;
  int n_group = 1;
  int topk_group = 1;
  int first_k_dense_replace = 0;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.0f;
  float rms_norm_eps = 1e-6f;
  // q_a_layernorm / kv_a_layernorm: transformers builds them with the RMSNorm default, not
  // rms_norm_eps.
  float latent_norm_eps = 1e-6f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  kernels::RopeLayout rope_layout = kernels::RopeLayout::kInterleaved;
  int num_nextn_predict_layers = 0;

  int qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  bool is_moe_layer(int layer) const { return layer >= first_k_dense_replace; }
};

struct DeepseekV3MlpWeights {
  kernels::WeightView gate, up, down;  // [inter][hidden], [inter][hidden], [hidden][inter]
  // Set at model creation where the backend fuses matmuls (Backend::fuses_matmuls): gate and up
  // packed as one weight for Backend::GatedMatMul (gate and up are then read for shapes only).
  kernels::WeightView gate_up;
};

struct DeepseekV3LayerWeights {
  kernels::WeightView attn_norm;
  kernels::WeightView q_proj;                        // when q_lora_rank == 0
  kernels::WeightView q_a_proj, q_a_norm, q_b_proj;  // when q_lora_rank > 0
  kernels::WeightView kv_a_proj, kv_a_norm, kv_b_proj, o_proj;
  // Set at model creation where the backend fuses matmuls (Backend::fuses_matmuls): q_a_proj and
  // kv_a_proj (same input) stacked for Backend::StackedMatMul; both views are then empty.
  kernels::WeightView q_kv_a;
  kernels::WeightView ffn_norm;
  DeepseekV3MlpWeights dense;               // dense layers
  kernels::WeightView router, router_bias;  // MoE layers: [experts][hidden], [experts]
  std::vector<DeepseekV3MlpWeights> experts;
  DeepseekV3MlpWeights shared;
};

// DeepSeek's MTP module (checkpoint layer num_hidden_layers): h' = Block(eh_proj([enorm(emb(t));
// hnorm(h)])), logits = head(final_norm(h')).
struct DeepseekV3MtpWeights {
  kernels::WeightView enorm, hnorm, eh_proj, final_norm, embed, head;
  DeepseekV3LayerWeights block;
};

struct DeepseekV3Weights {
  kernels::WeightView embed;
  std::vector<DeepseekV3LayerWeights> layers;
  kernels::WeightView final_norm;
  kernels::WeightView lm_head;
  std::vector<DeepseekV3MtpWeights> mtp;  // empty, or one module
};

// One sequence's slice of an MTP batch. Row i pairs the main model's final normalised hidden
// state at position p = start_pos + i with the token at position p + 1 (tokens[i]) and predicts
// the token at p + 2. The MTP layer's own cache slot for row i is p.
struct MtpChunk {
  std::span<const float> hidden;  // [tokens.size()][hidden_size]
  std::span<const std::int32_t> tokens;
  int start_pos = 0;  // the MTP cache already holds slots [0, start_pos)
  std::span<const std::int32_t> block_table;
  LogitsMode logits = LogitsMode::kLast;
};

class DeepseekV3Model : public Model {
 public:
  virtual const DeepseekV3Config& deepseek_config() const = 0;

  // Forward that also appends, for every row it returns logits for, the final normalised hidden
  // state (hidden_size floats) — the MTP module's input.
  virtual absl::Status ForwardWithHidden(std::span<const SequenceChunk> batch, const KvStorage& kv,
                                         std::vector<float>* logits,
                                         std::vector<float>* hidden) = 0;

  bool has_mtp() const { return mtp_kv_layout().num_layers > 0; }
  // The MTP layer keeps a cache of its own (num_layers 0 when the checkpoint has no MTP).
  virtual KvLayout mtp_kv_layout() const = 0;
  // Draft logits from the MTP module, in chunk order as Forward appends them.
  virtual absl::Status ForwardMtp(std::span<const MtpChunk> batch, const KvStorage& mtp_kv,
                                  std::vector<float>* logits) = 0;
};

struct DeepseekV3Options {
  // Absorbed MLA (fold kv_b_proj into the query and output) vs naive (expand K/V per head).
  bool mla_absorbed = true;
};

// Validates every weight's shape against the config (errors name the tensor) and builds the
// model. `storage` keeps the mappings the views point into alive.
absl::StatusOr<std::unique_ptr<DeepseekV3Model>> CreateDeepseekV3Model(
    DeepseekV3Config config, DeepseekV3Weights weights, std::vector<MappedFile> storage,
    const DeepseekV3Options& options, kernels::Backend* backend);

}  // namespace tandem::model
