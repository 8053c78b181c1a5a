#include "deepseek_v3/deepseek_v3_weights.h"

#include "absl/strings/str_cat.h"
#include "checkpoint/weight_checks.h"
#include "tandem/base/status_macros.h"

namespace tandem::model::internal {
namespace {

absl::Status CheckMlp(const std::string& prefix, const DeepseekV3MlpWeights& m, int hidden,
                      int inter) {
  TANDEM_RETURN_IF_ERROR(ExpectShape(prefix + "gate_proj.weight", m.gate, inter, hidden));
  TANDEM_RETURN_IF_ERROR(ExpectShape(prefix + "up_proj.weight", m.up, inter, hidden));
  return ExpectShape(prefix + "down_proj.weight", m.down, hidden, inter);
}

absl::Status CheckLayer(const DeepseekV3Config& c, int layer, bool moe,
                        const DeepseekV3LayerWeights& l) {
  const int h = c.base.hidden_size, nh = c.num_heads;
  auto name = [layer](const std::string& s) { return DeepseekLayerName(layer, s); };
  TANDEM_RETURN_IF_ERROR(ExpectShape(name("input_layernorm.weight"), l.attn_norm, 1, h));
  if (c.q_lora_rank > 0) {
    TANDEM_RETURN_IF_ERROR(
        ExpectShape(name("self_attn.q_a_proj.weight"), l.q_a_proj, c.q_lora_rank, h));
    TANDEM_RETURN_IF_ERROR(
        ExpectShape(name("self_attn.q_a_layernorm.weight"), l.q_a_norm, 1, c.q_lora_rank));
    TANDEM_RETURN_IF_ERROR(ExpectShape(name("self_attn.q_b_proj.weight"), l.q_b_proj,
                                       nh * c.qk_head_dim(), c.q_lora_rank));
  } else {
    TANDEM_RETURN_IF_ERROR(
        ExpectShape(name("self_attn.q_proj.weight"), l.q_proj, nh * c.qk_head_dim(), h));
  }
  TANDEM_RETURN_IF_ERROR(ExpectShape(name("self_attn.kv_a_proj_with_mqa.weight"), l.kv_a_proj,
                                     c.kv_lora_rank + c.qk_rope_head_dim, h));
  TANDEM_RETURN_IF_ERROR(
      ExpectShape(name("self_attn.kv_a_layernorm.weight"), l.kv_a_norm, 1, c.kv_lora_rank));
  TANDEM_RETURN_IF_ERROR(ExpectShape(name("self_attn.kv_b_proj.weight"), l.kv_b_proj,
                                     nh * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank));
  TANDEM_RETURN_IF_ERROR(
      ExpectShape(name("self_attn.o_proj.weight"), l.o_proj, h, nh * c.v_head_dim));
  TANDEM_RETURN_IF_ERROR(ExpectShape(name("post_attention_layernorm.weight"), l.ffn_norm, 1, h));
  if (!moe) return CheckMlp(name("mlp."), l.dense, h, c.intermediate_size);
  TANDEM_RETURN_IF_ERROR(ExpectShape(name("mlp.gate.weight"), l.router, c.n_routed_experts, h));
  TANDEM_RETURN_IF_ERROR(
      ExpectShape(name("mlp.gate.e_score_correction_bias"), l.router_bias, 1, c.n_routed_experts));
  if (static_cast<int>(l.experts.size()) != c.n_routed_experts) {
    return absl::InvalidArgumentError(absl::StrCat(name("mlp.experts"), ": expected ",
                                                   c.n_routed_experts, " experts, got ",
                                                   l.experts.size()));
  }
  for (int e = 0; e < c.n_routed_experts; ++e) {
    TANDEM_RETURN_IF_ERROR(CheckMlp(name(absl::StrCat("mlp.experts.", e, ".")), l.experts[e], h,
                                    c.moe_intermediate_size));
  }
  if (c.n_shared_experts > 0) {
    TANDEM_RETURN_IF_ERROR(CheckMlp(name("mlp.shared_experts."), l.shared, h,
                                    c.moe_intermediate_size * c.n_shared_experts));
  }
  return absl::OkStatus();
}

}  // namespace

std::string DeepseekLayerName(int layer, const std::string& suffix) {
  return absl::StrCat("model.layers.", layer, ".", suffix);
}

absl::Status ValidateDeepseekV3Config(const DeepseekV3Config& c) {
  const std::pair<const char*, int> positive[] = {{"vocab_size", c.base.vocab_size},
                                                  {"hidden_size", c.base.hidden_size},
                                                  {"num_hidden_layers", c.base.num_layers},
                                                  {"num_attention_heads", c.num_heads},
                                                  {"kv_lora_rank", c.kv_lora_rank},
                                                  {"qk_nope_head_dim", c.qk_nope_head_dim},
                                                  {"qk_rope_head_dim", c.qk_rope_head_dim},
                                                  {"v_head_dim", c.v_head_dim},
                                                  {"n_group", c.n_group},
                                                  {"topk_group", c.topk_group}};
  for (const auto& [field, value] : positive) {
    if (value <= 0) return absl::InvalidArgumentError(absl::StrCat(field, " must be positive"));
  }
  if (c.qk_rope_head_dim % 2 != 0) {
    return absl::InvalidArgumentError("qk_rope_head_dim must be even");
  }
  if (c.q_lora_rank < 0) return absl::InvalidArgumentError("q_lora_rank must not be negative");
  if (c.first_k_dense_replace < c.base.num_layers) {
    if (c.n_routed_experts <= 0 || c.moe_intermediate_size <= 0 || c.num_experts_per_tok <= 0) {
      return absl::InvalidArgumentError(
          "MoE layers need positive n_routed_experts, moe_intermediate_size, num_experts_per_tok");
    }
    if (c.n_routed_experts % c.n_group != 0 || c.topk_group > c.n_group) {
      return absl::InvalidArgumentError(absl::StrCat(
          "n_routed_experts (", c.n_routed_experts, ") must split evenly into n_group (", c.n_group,
          ") and topk_group (", c.topk_group, ") must not exceed it"));
    }
    if (c.num_experts_per_tok > c.topk_group * (c.n_routed_experts / c.n_group)) {
      return absl::InvalidArgumentError(
          "num_experts_per_tok exceeds the experts in topk_group groups");
    }
  }
  if (c.first_k_dense_replace > 0 && c.intermediate_size <= 0) {
    return absl::InvalidArgumentError("intermediate_size must be positive");
  }
  return absl::OkStatus();
}

absl::Status ValidateDeepseekV3Weights(const DeepseekV3Config& c, const DeepseekV3Weights& w) {
  const int h = c.base.hidden_size, v = c.base.vocab_size;
  TANDEM_RETURN_IF_ERROR(ExpectShape("model.embed_tokens.weight", w.embed, v, h));
  TANDEM_RETURN_IF_ERROR(ExpectShape("model.norm.weight", w.final_norm, 1, h));
  TANDEM_RETURN_IF_ERROR(ExpectShape("lm_head.weight", w.lm_head, v, h));
  if (static_cast<int>(w.layers.size()) != c.base.num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", c.base.num_layers, " layers, got ", w.layers.size()));
  }
  for (int l = 0; l < c.base.num_layers; ++l) {
    TANDEM_RETURN_IF_ERROR(CheckLayer(c, l, c.is_moe_layer(l), w.layers[l]));
  }
  if (w.mtp.size() > 1) return absl::UnimplementedError("more than one MTP layer");
  for (const DeepseekV3MtpWeights& m : w.mtp) {
    const int layer = c.base.num_layers;
    auto name = [layer](const std::string& s) { return DeepseekLayerName(layer, s); };
    TANDEM_RETURN_IF_ERROR(ExpectShape(name("enorm.weight"), m.enorm, 1, h));
    TANDEM_RETURN_IF_ERROR(ExpectShape(name("hnorm.weight"), m.hnorm, 1, h));
    TANDEM_RETURN_IF_ERROR(ExpectShape(name("eh_proj.weight"), m.eh_proj, h, 2 * h));
    TANDEM_RETURN_IF_ERROR(ExpectShape(name("shared_head.norm.weight"), m.final_norm, 1, h));
    if (!m.embed.empty()) {
      TANDEM_RETURN_IF_ERROR(ExpectShape(name("embed_tokens.weight"), m.embed, v, h));
    }
    if (!m.head.empty()) {
      TANDEM_RETURN_IF_ERROR(ExpectShape(name("shared_head.head.weight"), m.head, v, h));
    }
    // DeepSeek's MTP block is always a MoE layer.
    TANDEM_RETURN_IF_ERROR(CheckLayer(c, layer, /*moe=*/true, m.block));
  }
  return absl::OkStatus();
}

}  // namespace tandem::model::internal
