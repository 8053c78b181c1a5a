#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tandem/base/mapped_file.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/model.h"

namespace tandem::model {

enum class RopeScalingType : std::uint8_t { kNone, kLinear, kDynamic, kLlama3, kYarn };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;     // llama3
  float high_freq_factor = 4.0f;    // llama3
  int original_max_position_embeddings = 0;
  float beta_fast = 32.0f;          // yarn
  float beta_slow = 1.0f;           // yarn
  float mscale = 1.0f;              // yarn (DeepSeek)
  float mscale_all_dim = 0.0f;      // yarn (DeepSeek)
};

struct LlamaConfig {
  ModelConfig base;
  int intermediate_size = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  kernels::RopeLayout rope_layout = kernels::RopeLayout::kHalfSplit;
};

struct LlamaLayerWeights {
  kernels::WeightView attn_norm, wq, wk, wv, wo;
  kernels::WeightView ffn_norm, w_gate, w_up, w_down;
  // Set at load where the backend fuses gate and up (Backend::GatedMatMul); w_gate and w_up are
  // then not read.
  kernels::WeightView w_gate_up;
  // Likewise wq, wk and wv stacked for Backend::StackedMatMul.
  kernels::WeightView w_qkv;
};

struct LlamaWeights {
  kernels::WeightView embed;  // [vocab][dim]
  std::vector<LlamaLayerWeights> layers;
  kernels::WeightView final_norm;
  kernels::WeightView lm_head;  // [vocab][dim]; may alias embed
};

// Validates shapes against the config (errors name the tensor) and builds the model. `storage`
// keeps the mapped files the weight views point into alive for the model's lifetime.
absl::StatusOr<std::unique_ptr<Model>> CreateLlamaModel(LlamaConfig config, LlamaWeights weights,
                                                        std::vector<MappedFile> storage,
                                                        kernels::Backend* backend);

}  // namespace tandem::model
