#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "tandem/base/mapped_file.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/llama.h"
#include "tandem/model/model.h"

namespace tandem::model {

// DeepSeek-V4 (DeepseekV4ForCausalLM, transformers' models/deepseek_v4): one shared K=V head per
// layer attended by every query head with a learned per-head sink; per-layer attention kind
// (sliding window only, or sliding window plus compressed entries: CSA with a top-k indexer, HCA
// without); hyper-connections (hc_mult residual streams); every layer MoE, the first ones routed
// by a fixed token -> experts table.
enum class DeepseekV4AttentionKind : std::uint8_t {
  kSliding,
  kCompressedSparse,
  kHeavilyCompressed,
};

struct DeepseekV4Config {
  ModelConfig base;
  int moe_intermediate_size = 0;  // routed experts and the (single) shared expert
  int num_heads = 0;
  int head_dim = 0;       // the K=V head; the last rope_dim channels carry the rotary part
  int rope_dim = 0;       // head_dim * partial_rotary_factor
  int q_lora_rank = 0;
  int o_groups = 0;
  int o_lora_rank = 0;
  int n_routed_experts = 0;
  int num_experts_per_tok = 0;
  float routed_scaling_factor = 1.0f;
  float swiglu_limit = 10.0f;  // clamps expert (and shared) gate/up pre-activations
  float rms_norm_eps = 1e-6f;
  int sliding_window = 0;  // keys at positions (p - sliding_window, p]
  int csa_rate = 4;
  int hca_rate = 128;
  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;
  int hc_mult = 1;
  int hc_sinkhorn_iters = 1;
  float hc_eps = 1e-6f;
  float rope_theta = 10000.0f;  // sliding layers, plain rope
  float compress_rope_theta = 160000.0f;  // compressed layers (and their indexer)
  RopeScaling compress_rope_scaling;  // YaRN frequencies only: V4 does not scale cos/sin
  std::vector<DeepseekV4AttentionKind> attention_kinds;  // per layer
  std::vector<bool> hash_routed;                         // per layer
  int num_nextn_predict_layers = 0;  // declared by the checkpoint, not loaded

  int compress_rate(int layer) const {
    switch (attention_kinds[layer]) {
      case DeepseekV4AttentionKind::kCompressedSparse: return csa_rate;
      case DeepseekV4AttentionKind::kHeavilyCompressed: return hca_rate;
      default: return 0;
    }
  }
  // Width of one token's compressor projection: CSA windows overlap (two series per token).
  int compressor_width(int layer) const {
    return attention_kinds[layer] == DeepseekV4AttentionKind::kCompressedSparse ? 2 * head_dim
                                                                                  : head_dim;
  }
};

struct DeepseekV4MlpWeights {
  kernels::WeightView gate, up, down;  // w1 [inter][hidden], w3 [inter][hidden], w2 [hidden][inter]
};

struct DeepseekV4CompressorWeights {
  kernels::WeightView kv, gate;  // [width][hidden]
  kernels::WeightView ape;       // [rate][width] position bias added to the gate
  kernels::WeightView norm;      // [dim]
};

struct DeepseekV4LayerWeights {
  kernels::WeightView attn_norm, ffn_norm;
  kernels::WeightView hc_attn_fn, hc_attn_base, hc_attn_scale;  // [(2+n)n][n*hidden], [(2+n)n], [3]
  kernels::WeightView hc_ffn_fn, hc_ffn_base, hc_ffn_scale;
  kernels::WeightView q_a, q_norm, q_b;  // q_b: [heads*head_dim][q_lora_rank]
  kernels::WeightView kv, kv_norm;       // [head_dim][hidden], [head_dim]
  kernels::WeightView o_a;               // [o_groups*o_lora_rank][heads*head_dim/o_groups]
  kernels::WeightView o_b;               // [hidden][o_groups*o_lora_rank]
  kernels::WeightView sinks;             // [heads]
  DeepseekV4CompressorWeights compressor;           // compressed layers
  DeepseekV4CompressorWeights indexer_compressor;   // CSA layers
  kernels::WeightView indexer_q_b;                  // [index_heads*index_head_dim][q_lora_rank]
  kernels::WeightView indexer_weights;              // [index_heads][hidden]
  kernels::WeightView router, router_bias;          // [experts][hidden], [experts] (top-k layers)
  std::vector<std::int32_t> hash_table;             // [vocab][top_k] (hash layers)
  std::vector<DeepseekV4MlpWeights> experts;
  DeepseekV4MlpWeights shared;
};

struct DeepseekV4Weights {
  kernels::WeightView embed;
  std::vector<DeepseekV4LayerWeights> layers;
  kernels::WeightView hc_head_fn, hc_head_base, hc_head_scale;  // [n][n*hidden], [n], [1]
  kernels::WeightView final_norm;
  kernels::WeightView lm_head;
};

// KV cache row of one token in one layer (floats_per_token is the widest layer's row):
//   [0, head_dim)                   the token's K=V head after kv_norm and rope (every layer)
//   compressed layers, then:
//   [.., +width)                    compressor kv projection of the token (raw)
//   [.., +width)                    compressor gate projection of the token (raw, before ape)
//   [.., +head_dim)                 compressed entry e, in the row of window e's last token
//   CSA layers, then:
//   [.., +2*index_head_dim)         indexer compressor kv projection (raw)
//   [.., +2*index_head_dim)         indexer compressor gate projection (raw)
//   [.., +index_head_dim)           indexer entry e, in the row of window e's last token
// A window may be split across chunks, so its source tokens' raw projections stay in the cache
// until the forward that completes the window pools them (a CSA entry also reads the previous
// window's rows); the pooled entry is then written once and read by every later query.
KvLayout DeepseekV4KvLayout(const DeepseekV4Config& config);

// Validates the config and every weight's shape (errors name the tensor) and builds the model.
absl::StatusOr<std::unique_ptr<Model>> CreateDeepseekV4Model(DeepseekV4Config config,
                                                             DeepseekV4Weights weights,
                                                             std::vector<MappedFile> storage,
                                                             kernels::Backend* backend);

}  // namespace tandem::model
