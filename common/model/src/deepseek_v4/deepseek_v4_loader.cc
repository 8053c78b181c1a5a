#include "deepseek_v4/deepseek_v4_loader.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "checkpoint/weight_checks.h"
#include "tandem/base/status_macros.h"

namespace tandem::model::internal {

absl::Status ValidateDeepseekV4Config(const DeepseekV4Config& c) {
  auto bad = [](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("DeepSeek-V4 config: ", what));
  };
  const int n = c.base.num_layers;
  if (static_cast<int>(c.attention_kinds.size()) != n ||
      static_cast<int>(c.hash_routed.size()) != n)
    return bad("layer_types and mlp_layer_types must have num_hidden_layers entries");
  if (c.num_heads <= 0 || c.head_dim <= 0 || c.q_lora_rank <= 0) return bad("empty attention");
  if (c.rope_dim <= 0 || c.rope_dim % 2 != 0 || c.rope_dim > c.head_dim)
    return bad("rope dims must be even and fit in head_dim");
  if (c.o_groups <= 0 || c.o_lora_rank <= 0 || c.num_heads % c.o_groups != 0)
    return bad("num_attention_heads must be a multiple of o_groups");
  if (c.n_routed_experts <= 0 || c.num_experts_per_tok <= 0 ||
      c.num_experts_per_tok > c.n_routed_experts || c.moe_intermediate_size <= 0)
    return bad("MoE sizes out of range");
  if (c.sliding_window <= 0 || c.csa_rate <= 0 || c.hca_rate <= 0) return bad("window sizes");
  if (c.hc_mult <= 0 || c.hc_sinkhorn_iters <= 0) return bad("hyper-connection sizes");
  for (int i = 0; i < n; ++i) {
    if (c.attention_kinds[i] != DeepseekV4AttentionKind::kCompressedSparse) continue;
    if (c.index_n_heads <= 0 || c.index_topk <= 0 || c.index_head_dim < c.rope_dim)
      return bad("indexer sizes (index_head_dim must hold the rope dims)");
  }
  return absl::OkStatus();
}

namespace {

class Mapper {
 public:
  Mapper(const SafetensorsCheckpoint& ckpt, bool check_finite)
      : ckpt_(ckpt), check_finite_(check_finite) {}

  absl::Status Take(const std::string& name, std::int64_t rows, std::int64_t cols,
                    kernels::WeightView* out) const {
    TANDEM_ASSIGN_OR_RETURN(*out, ckpt_.Get(name, check_finite_));
    return ExpectShape(name, *out, rows, cols);
  }
  absl::Status Vector(const std::string& name, std::int64_t n, kernels::WeightView* out) const {
    return Take(name, 1, n, out);
  }
  absl::Status Mlp(const std::string& p, std::int64_t hidden, std::int64_t inter,
                   DeepseekV4MlpWeights* m) const {
    TANDEM_RETURN_IF_ERROR(Take(p + "w1.weight", inter, hidden, &m->gate));
    TANDEM_RETURN_IF_ERROR(Take(p + "w3.weight", inter, hidden, &m->up));
    return Take(p + "w2.weight", hidden, inter, &m->down);
  }
  absl::Status Compressor(const std::string& p, std::int64_t hidden, int rate, int width, int dim,
                          DeepseekV4CompressorWeights* w) const {
    TANDEM_RETURN_IF_ERROR(Take(p + "wkv.weight", width, hidden, &w->kv));
    TANDEM_RETURN_IF_ERROR(Take(p + "wgate.weight", width, hidden, &w->gate));
    TANDEM_RETURN_IF_ERROR(Take(p + "ape", rate, width, &w->ape));
    return Vector(p + "norm.weight", dim, &w->norm);
  }
  absl::Status HashTable(const std::string& name, const DeepseekV4Config& c,
                         std::vector<std::int32_t>* out) const {
    kernels::WeightView t;
    TANDEM_RETURN_IF_ERROR(Take(name, c.base.vocab_size, c.num_experts_per_tok, &t));
    out->resize(static_cast<std::size_t>(t.numel()));
    for (std::int64_t r = 0; r < t.rows; ++r) {
      for (std::int64_t k = 0; k < t.cols; ++k) {
        const float e = t.At(r, k);
        if (!(e >= 0.0f && e < static_cast<float>(c.n_routed_experts)) || e != std::floor(e)) {
          return absl::InvalidArgumentError(
              absl::StrCat(name, ": entry [", r, ", ", k, "] is not an expert id"));
        }
        (*out)[r * t.cols + k] = static_cast<std::int32_t>(e);
      }
    }
    return absl::OkStatus();
  }

 private:
  const SafetensorsCheckpoint& ckpt_;
  bool check_finite_;
};

absl::Status MapLayer(const DeepseekV4Config& c, const Mapper& m, int i,
                      DeepseekV4LayerWeights* l) {
  const std::int64_t h = c.base.hidden_size, d = c.head_dim, qr = c.q_lora_rank;
  const std::int64_t nh = c.num_heads, hc = c.hc_mult, mix = (2 + hc) * hc;
  const std::string p = absl::StrCat("model.layers.", i, ".");
  TANDEM_RETURN_IF_ERROR(m.Vector(p + "attn_norm.weight", h, &l->attn_norm));
  TANDEM_RETURN_IF_ERROR(m.Vector(p + "ffn_norm.weight", h, &l->ffn_norm));
  TANDEM_RETURN_IF_ERROR(m.Take(p + "hc_attn_fn", mix, hc * h, &l->hc_attn_fn));
  TANDEM_RETURN_IF_ERROR(m.Vector(p + "hc_attn_base", mix, &l->hc_attn_base));
  TANDEM_RETURN_IF_ERROR(m.Vector(p + "hc_attn_scale", 3, &l->hc_attn_scale));
  TANDEM_RETURN_IF_ERROR(m.Take(p + "hc_ffn_fn", mix, hc * h, &l->hc_ffn_fn));
  TANDEM_RETURN_IF_ERROR(m.Vector(p + "hc_ffn_base", mix, &l->hc_ffn_base));
  TANDEM_RETURN_IF_ERROR(m.Vector(p + "hc_ffn_scale", 3, &l->hc_ffn_scale));
  const std::string a = p + "attn.";
  TANDEM_RETURN_IF_ERROR(m.Take(a + "wq_a.weight", qr, h, &l->q_a));
  TANDEM_RETURN_IF_ERROR(m.Vector(a + "q_norm.weight", qr, &l->q_norm));
  TANDEM_RETURN_IF_ERROR(m.Take(a + "wq_b.weight", nh * d, qr, &l->q_b));
  TANDEM_RETURN_IF_ERROR(m.Take(a + "wkv.weight", d, h, &l->kv));
  TANDEM_RETURN_IF_ERROR(m.Vector(a + "norm.weight", d, &l->kv_norm));
  TANDEM_RETURN_IF_ERROR(m.Take(a + "wo_a.weight", std::int64_t{c.o_groups} * c.o_lora_rank,
                                nh * d / c.o_groups, &l->o_a));
  TANDEM_RETURN_IF_ERROR(
      m.Take(a + "wo_b.weight", h, std::int64_t{c.o_groups} * c.o_lora_rank, &l->o_b));
  TANDEM_RETURN_IF_ERROR(m.Vector(a + "attn_sink", nh, &l->sinks));
  const int rate = c.compress_rate(i);
  if (rate > 0) {
    TANDEM_RETURN_IF_ERROR(m.Compressor(a + "compressor.", h, rate, c.compressor_width(i),
                                        c.head_dim, &l->compressor));
  }
  if (c.attention_kinds[i] == DeepseekV4AttentionKind::kCompressedSparse) {
    const std::int64_t id = c.index_head_dim;
    TANDEM_RETURN_IF_ERROR(m.Compressor(a + "indexer.compressor.", h, rate, 2 * c.index_head_dim,
                                        c.index_head_dim, &l->indexer_compressor));
    TANDEM_RETURN_IF_ERROR(
        m.Take(a + "indexer.wq_b.weight", c.index_n_heads * id, qr, &l->indexer_q_b));
    TANDEM_RETURN_IF_ERROR(
        m.Take(a + "indexer.weights_proj.weight", c.index_n_heads, h, &l->indexer_weights));
  }
  const std::string f = p + "ffn.";
  TANDEM_RETURN_IF_ERROR(m.Take(f + "gate.weight", c.n_routed_experts, h, &l->router));
  if (c.hash_routed[i]) {
    TANDEM_RETURN_IF_ERROR(m.HashTable(f + "gate.tid2eid", c, &l->hash_table));
  } else {
    TANDEM_RETURN_IF_ERROR(m.Vector(f + "gate.bias", c.n_routed_experts, &l->router_bias));
  }
  l->experts.resize(c.n_routed_experts);
  for (int e = 0; e < c.n_routed_experts; ++e) {
    TANDEM_RETURN_IF_ERROR(
        m.Mlp(absl::StrCat(f, "experts.", e, "."), h, c.moe_intermediate_size, &l->experts[e]));
  }
  return m.Mlp(f + "shared_experts.", h, c.moe_intermediate_size, &l->shared);
}

}  // namespace

absl::StatusOr<DeepseekV4Weights> MapDeepseekV4Weights(const DeepseekV4Config& c,
                                                       const SafetensorsCheckpoint& ckpt,
                                                       bool tie_word_embeddings,
                                                       bool check_finite) {
  const Mapper m(ckpt, check_finite);
  const std::int64_t h = c.base.hidden_size, hc = c.hc_mult;
  DeepseekV4Weights w;
  TANDEM_RETURN_IF_ERROR(m.Take("model.embed_tokens.weight", c.base.vocab_size, h, &w.embed));
  TANDEM_RETURN_IF_ERROR(m.Take("model.hc_head.hc_fn", hc, hc * h, &w.hc_head_fn));
  TANDEM_RETURN_IF_ERROR(m.Vector("model.hc_head.hc_base", hc, &w.hc_head_base));
  TANDEM_RETURN_IF_ERROR(m.Vector("model.hc_head.hc_scale", 1, &w.hc_head_scale));
  TANDEM_RETURN_IF_ERROR(m.Vector("model.norm.weight", h, &w.final_norm));
  if (tie_word_embeddings) {
    w.lm_head = w.embed;
  } else {
    TANDEM_RETURN_IF_ERROR(m.Take("head.weight", c.base.vocab_size, h, &w.lm_head));
  }
  w.layers.resize(c.base.num_layers);
  for (int i = 0; i < c.base.num_layers; ++i) {
    TANDEM_RETURN_IF_ERROR(MapLayer(c, m, i, &w.layers[i]));
  }
  return w;
}

}  // namespace tandem::model::internal
