#include "deepseek_v3/deepseek_v3_loader.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "deepseek_v3/deepseek_v3_weights.h"
#include "tandem/base/status_macros.h"

namespace tandem::model::internal {
namespace {

class Mapper {
 public:
  Mapper(const DeepseekV3Config& c, const SafetensorsCheckpoint& ckpt, bool check_finite)
      : c_(c), ckpt_(ckpt), check_finite_(check_finite) {}

  absl::StatusOr<kernels::WeightView> Get(const std::string& name) const {
    return ckpt_.Get(name, check_finite_);
  }

  absl::Status Mlp(const std::string& prefix, DeepseekV3MlpWeights* m) const {
    TANDEM_ASSIGN_OR_RETURN(m->gate, Get(prefix + "gate_proj.weight"));
    TANDEM_ASSIGN_OR_RETURN(m->up, Get(prefix + "up_proj.weight"));
    TANDEM_ASSIGN_OR_RETURN(m->down, Get(prefix + "down_proj.weight"));
    return absl::OkStatus();
  }

  absl::Status ExpectDims(const std::string& name, std::vector<std::int64_t> want) const {
    TANDEM_ASSIGN_OR_RETURN(const std::vector<std::int64_t> got, ckpt_.Shape(name));
    if (got != want) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": expected [", absl::StrJoin(want, ", "), "], checkpoint has [",
                       absl::StrJoin(got, ", "), "]"));
    }
    return absl::OkStatus();
  }

  absl::Status Experts(int layer, DeepseekV3LayerWeights* l) const {
    const int n = c_.n_routed_experts, inter = c_.moe_intermediate_size, h = c_.base.hidden_size;
    const std::string fused_gate_up = DeepseekLayerName(layer, "mlp.experts.gate_up_proj");
    const std::string fused_down = DeepseekLayerName(layer, "mlp.experts.down_proj");
    l->experts.resize(n);
    if (!ckpt_.Contains(fused_gate_up)) {
      for (int e = 0; e < n; ++e) {
        TANDEM_RETURN_IF_ERROR(
            Mlp(DeepseekLayerName(layer, absl::StrCat("mlp.experts.", e, ".")), &l->experts[e]));
      }
      return absl::OkStatus();
    }
    TANDEM_RETURN_IF_ERROR(ExpectDims(fused_gate_up, {n, 2 * inter, h}));
    TANDEM_RETURN_IF_ERROR(ExpectDims(fused_down, {n, h, inter}));
    TANDEM_ASSIGN_OR_RETURN(const kernels::WeightView gate_up, Get(fused_gate_up));
    TANDEM_ASSIGN_OR_RETURN(const kernels::WeightView down, Get(fused_down));
    for (int e = 0; e < n; ++e) {
      l->experts[e].gate = gate_up.RowSlice(static_cast<std::int64_t>(e) * 2 * inter, inter);
      l->experts[e].up = gate_up.RowSlice(static_cast<std::int64_t>(e) * 2 * inter + inter, inter);
      l->experts[e].down = down.RowSlice(static_cast<std::int64_t>(e) * h, h);
    }
    return absl::OkStatus();
  }

  absl::Status Layer(int layer, bool moe, DeepseekV3LayerWeights* l) const {
    auto name = [layer](const std::string& s) { return DeepseekLayerName(layer, s); };
    TANDEM_ASSIGN_OR_RETURN(l->attn_norm, Get(name("input_layernorm.weight")));
    if (c_.q_lora_rank > 0) {
      TANDEM_ASSIGN_OR_RETURN(l->q_a_proj, Get(name("self_attn.q_a_proj.weight")));
      TANDEM_ASSIGN_OR_RETURN(l->q_a_norm, Get(name("self_attn.q_a_layernorm.weight")));
      TANDEM_ASSIGN_OR_RETURN(l->q_b_proj, Get(name("self_attn.q_b_proj.weight")));
    } else {
      TANDEM_ASSIGN_OR_RETURN(l->q_proj, Get(name("self_attn.q_proj.weight")));
    }
    TANDEM_ASSIGN_OR_RETURN(l->kv_a_proj, Get(name("self_attn.kv_a_proj_with_mqa.weight")));
    TANDEM_ASSIGN_OR_RETURN(l->kv_a_norm, Get(name("self_attn.kv_a_layernorm.weight")));
    TANDEM_ASSIGN_OR_RETURN(l->kv_b_proj, Get(name("self_attn.kv_b_proj.weight")));
    TANDEM_ASSIGN_OR_RETURN(l->o_proj, Get(name("self_attn.o_proj.weight")));
    TANDEM_ASSIGN_OR_RETURN(l->ffn_norm, Get(name("post_attention_layernorm.weight")));
    if (!moe) return Mlp(name("mlp."), &l->dense);
    TANDEM_ASSIGN_OR_RETURN(l->router, Get(name("mlp.gate.weight")));
    TANDEM_ASSIGN_OR_RETURN(l->router_bias, Get(name("mlp.gate.e_score_correction_bias")));
    TANDEM_RETURN_IF_ERROR(Experts(layer, l));
    if (c_.n_shared_experts > 0) return Mlp(name("mlp.shared_experts."), &l->shared);
    return absl::OkStatus();
  }

  absl::Status Mtp(DeepseekV3MtpWeights* m) const {
    const int layer = c_.base.num_layers;
    auto name = [layer](const std::string& s) { return DeepseekLayerName(layer, s); };
    TANDEM_ASSIGN_OR_RETURN(m->enorm, Get(name("enorm.weight")));
    TANDEM_ASSIGN_OR_RETURN(m->hnorm, Get(name("hnorm.weight")));
    TANDEM_ASSIGN_OR_RETURN(m->eh_proj, Get(name("eh_proj.weight")));
    TANDEM_ASSIGN_OR_RETURN(m->final_norm, Get(name("shared_head.norm.weight")));
    // DeepSeek ships copies of the embedding and head; without them the main model's are used.
    if (ckpt_.Contains(name("embed_tokens.weight"))) {
      TANDEM_ASSIGN_OR_RETURN(m->embed, Get(name("embed_tokens.weight")));
    }
    if (ckpt_.Contains(name("shared_head.head.weight"))) {
      TANDEM_ASSIGN_OR_RETURN(m->head, Get(name("shared_head.head.weight")));
    }
    return Layer(layer, /*moe=*/true, &m->block);
  }

 private:
  const DeepseekV3Config& c_;
  const SafetensorsCheckpoint& ckpt_;
  bool check_finite_;
};

}  // namespace

absl::StatusOr<DeepseekV3Weights> MapDeepseekV3Weights(const DeepseekV3Config& config,
                                                       const SafetensorsCheckpoint& ckpt,
                                                       bool tie_word_embeddings,
                                                       bool check_finite) {
  const Mapper map(config, ckpt, check_finite);
  DeepseekV3Weights w;
  TANDEM_ASSIGN_OR_RETURN(w.embed, map.Get("model.embed_tokens.weight"));
  TANDEM_ASSIGN_OR_RETURN(w.final_norm, map.Get("model.norm.weight"));
  if (tie_word_embeddings) {
    w.lm_head = w.embed;
  } else {
    TANDEM_ASSIGN_OR_RETURN(w.lm_head, map.Get("lm_head.weight"));
  }
  w.layers.resize(config.base.num_layers);
  for (int l = 0; l < config.base.num_layers; ++l) {
    TANDEM_RETURN_IF_ERROR(map.Layer(l, config.is_moe_layer(l), &w.layers[l]));
  }
  // Converted checkpoints often drop the MTP layer; the model then simply has none.
  const std::string mtp_marker = DeepseekLayerName(config.base.num_layers, "eh_proj.weight");
  if (config.num_nextn_predict_layers > 0 && ckpt.Contains(mtp_marker)) {
    w.mtp.emplace_back();
    TANDEM_RETURN_IF_ERROR(map.Mtp(&w.mtp.back()));
  }
  return w;
}

}  // namespace tandem::model::internal
