// Hugging Face checkpoints: config.json + safetensors (single file or index + shards).
#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/hf_config.h"
#include "checkpoint/loader_internal.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/weight_checks.h"
#include "deepseek_v3/deepseek_v3_loader.h"
#include "deepseek_v3/deepseek_v3_weights.h"
#include "deepseek_v4/deepseek_v4_loader.h"
#include "tandem/base/status_macros.h"
#include "tandem/model/deepseek_v3.h"
#include "tandem/model/llama.h"

namespace tandem::model::internal {
namespace {

// HF Llama names; shapes checked here so errors carry the checkpoint's own names.
absl::StatusOr<LlamaWeights> MapLlamaWeights(const LlamaConfig& c,
                                             const SafetensorsCheckpoint& ckpt, bool tie,
                                             bool check_finite) {
  const std::int64_t h = c.base.hidden_size, q = c.num_heads * c.head_dim;
  const std::int64_t kv = c.num_kv_heads * c.head_dim, inter = c.intermediate_size;
  auto take = [&](const std::string& name, std::int64_t rows, std::int64_t cols,
                  kernels::WeightView* out) -> absl::Status {
    TANDEM_ASSIGN_OR_RETURN(*out, ckpt.Get(name, check_finite));
    return ExpectShape(name, *out, rows, cols);
  };
  LlamaWeights w;
  TANDEM_RETURN_IF_ERROR(take("model.embed_tokens.weight", c.base.vocab_size, h, &w.embed));
  TANDEM_RETURN_IF_ERROR(take("model.norm.weight", 1, h, &w.final_norm));
  if (tie) {
    w.lm_head = w.embed;
  } else {
    TANDEM_RETURN_IF_ERROR(take("lm_head.weight", c.base.vocab_size, h, &w.lm_head));
  }
  w.layers.resize(c.base.num_layers);
  for (int i = 0; i < c.base.num_layers; ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    LlamaLayerWeights& l = w.layers[i];
    TANDEM_RETURN_IF_ERROR(take(p + "input_layernorm.weight", 1, h, &l.attn_norm));
    TANDEM_RETURN_IF_ERROR(take(p + "self_attn.q_proj.weight", q, h, &l.wq));
    TANDEM_RETURN_IF_ERROR(take(p + "self_attn.k_proj.weight", kv, h, &l.wk));
    TANDEM_RETURN_IF_ERROR(take(p + "self_attn.v_proj.weight", kv, h, &l.wv));
    TANDEM_RETURN_IF_ERROR(take(p + "self_attn.o_proj.weight", h, q, &l.wo));
    TANDEM_RETURN_IF_ERROR(take(p + "post_attention_layernorm.weight", 1, h, &l.ffn_norm));
    TANDEM_RETURN_IF_ERROR(take(p + "mlp.gate_proj.weight", inter, h, &l.w_gate));
    TANDEM_RETURN_IF_ERROR(take(p + "mlp.up_proj.weight", inter, h, &l.w_up));
    TANDEM_RETURN_IF_ERROR(take(p + "mlp.down_proj.weight", h, inter, &l.w_down));
  }
  return w;
}

std::string ServedName(const std::string& dir, const LoadOptions& options) {
  if (!options.served_name.empty()) return options.served_name;
  std::filesystem::path p(dir);
  if (!p.has_filename()) p = p.parent_path();  // "dir/" -> "dir"
  return p.filename().string();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> LoadHuggingFace(const std::string& dir,
                                                       const LoadOptions& options,
                                                       kernels::Backend* backend) {
  TANDEM_ASSIGN_OR_RETURN(HfConfig config, ReadHfConfig(dir));
  TANDEM_ASSIGN_OR_RETURN(SafetensorsCheckpoint ckpt,
                          SafetensorsCheckpoint::Open(dir, config.fp8_block));
  if (config.arch == Architecture::kDeepseekV4) {
    config.deepseek_v4.base.name = ServedName(dir, options);
    TANDEM_RETURN_IF_ERROR(ValidateDeepseekV4Config(config.deepseek_v4));
    TANDEM_ASSIGN_OR_RETURN(DeepseekV4Weights weights,
                            MapDeepseekV4Weights(config.deepseek_v4, ckpt,
                                                 config.tie_word_embeddings, options.check_finite));
    return CreateDeepseekV4Model(std::move(config.deepseek_v4), std::move(weights),
                                 std::move(ckpt).ReleaseMappings(), backend);
  }
  if (config.arch == Architecture::kDeepseekV3) {
    config.deepseek.base.name = ServedName(dir, options);
    TANDEM_RETURN_IF_ERROR(ValidateDeepseekV3Config(config.deepseek));
    TANDEM_ASSIGN_OR_RETURN(DeepseekV3Weights weights,
                            MapDeepseekV3Weights(config.deepseek, ckpt, config.tie_word_embeddings,
                                                 options.check_finite));
    DeepseekV3Options ds_options;
    ds_options.mla_absorbed = options.mla_absorbed;
    TANDEM_ASSIGN_OR_RETURN(
        std::unique_ptr<DeepseekV3Model> model,
        CreateDeepseekV3Model(std::move(config.deepseek), std::move(weights),
                              std::move(ckpt).ReleaseMappings(), ds_options, backend));
    return std::unique_ptr<Model>(std::move(model));
  }
  config.llama.base.name = ServedName(dir, options);
  TANDEM_ASSIGN_OR_RETURN(
      LlamaWeights weights,
      MapLlamaWeights(config.llama, ckpt, config.tie_word_embeddings, options.check_finite));
  return CreateLlamaModel(std::move(config.llama), std::move(weights),
                          std::move(ckpt).ReleaseMappings(), backend);
}

}  // namespace tandem::model::internal
