// Llama forward pass over the kernels::Backend interface. All chunks of a batch run as one
// [total_tokens][dim] activation so every projection is a single batched matmul; only attention
// runs per chunk. The backend's per-row invariance makes a chunk's results independent of the
// rest of the batch.
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "checkpoint/weight_checks.h"
#include "checkpoint/weight_packing.h"
#include "input_embeddings.h"
#include "llama/llama_batch.h"
#include "llama/llama_scratch.h"
#include "rope.h"
#include "tandem/base/status_macros.h"
#include "tandem/kernels/panels.h"
#include "tandem/model/llama.h"

namespace tandem::model {
namespace {

using internal::ScratchBuffer;

absl::Status ValidateConfig(const LlamaConfig& c, std::size_t weight_layers) {
  const ModelConfig& b = c.base;
  if (b.vocab_size <= 0 || b.hidden_size <= 0 || b.num_layers <= 0 ||
      b.max_position_embeddings <= 0 || c.intermediate_size <= 0 || c.num_heads <= 0 ||
      c.num_kv_heads <= 0 || c.head_dim <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Llama config needs positive sizes; got vocab_size ", b.vocab_size, ", hidden_size ",
        b.hidden_size, ", num_layers ", b.num_layers, ", max_position_embeddings ",
        b.max_position_embeddings, ", intermediate_size ", c.intermediate_size, ", num_heads ",
        c.num_heads, ", num_kv_heads ", c.num_kv_heads, ", head_dim ", c.head_dim));
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_heads ", c.num_heads, " is not a multiple of num_kv_heads ", c.num_kv_heads));
  }
  if (c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("head_dim ", c.head_dim, " must be even for rotary embeddings"));
  }
  if (!(c.rms_norm_eps >= 0.0f) || !(c.rope_theta > 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid rms_norm_eps ", c.rms_norm_eps, " or rope_theta ", c.rope_theta));
  }
  if (weight_layers != static_cast<std::size_t>(b.num_layers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("config has ", b.num_layers, " layers, weights have ", weight_layers));
  }
  return absl::OkStatus();
}

absl::Status ValidateWeights(const LlamaConfig& c, const LlamaWeights& w) {
  using internal::ExpectShape;
  const std::int64_t dim = c.base.hidden_size;
  const std::int64_t q_dim = static_cast<std::int64_t>(c.num_heads) * c.head_dim;
  const std::int64_t kv_dim = static_cast<std::int64_t>(c.num_kv_heads) * c.head_dim;
  const std::int64_t hidden = c.intermediate_size;
  TANDEM_RETURN_IF_ERROR(ExpectShape("embed", w.embed, c.base.vocab_size, dim));
  TANDEM_RETURN_IF_ERROR(ExpectShape("final_norm", w.final_norm, 1, dim));
  TANDEM_RETURN_IF_ERROR(ExpectShape("lm_head", w.lm_head, c.base.vocab_size, dim));
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const LlamaLayerWeights& lw = w.layers[l];
    const std::string p = absl::StrCat("layers.", l, ".");
    TANDEM_RETURN_IF_ERROR(ExpectShape(p + "attn_norm", lw.attn_norm, 1, dim));
    TANDEM_RETURN_IF_ERROR(ExpectShape(p + "wq", lw.wq, q_dim, dim));
    TANDEM_RETURN_IF_ERROR(ExpectShape(p + "wk", lw.wk, kv_dim, dim));
    TANDEM_RETURN_IF_ERROR(ExpectShape(p + "wv", lw.wv, kv_dim, dim));
    TANDEM_RETURN_IF_ERROR(ExpectShape(p + "wo", lw.wo, dim, q_dim));
    TANDEM_RETURN_IF_ERROR(ExpectShape(p + "ffn_norm", lw.ffn_norm, 1, dim));
    TANDEM_RETURN_IF_ERROR(ExpectShape(p + "w_gate", lw.w_gate, hidden, dim));
    TANDEM_RETURN_IF_ERROR(ExpectShape(p + "w_up", lw.w_up, hidden, dim));
    TANDEM_RETURN_IF_ERROR(ExpectShape(p + "w_down", lw.w_down, dim, hidden));
  }
  return absl::OkStatus();
}

// Where a chunk's rows sit in the batch activation.
struct ChunkRows {
  std::int64_t first_row;
  std::int64_t count;
};

class LlamaModel final : public Model {
 public:
  LlamaModel(LlamaConfig config, LlamaWeights weights, std::vector<MappedFile> storage,
             std::vector<kernels::PanelWeight> packed, kernels::Backend* backend)
      : config_(std::move(config)),
        weights_(std::move(weights)),
        storage_(std::move(storage)),
        packed_(std::move(packed)),
        backend_(backend),
        rope_(internal::ComputeRopeTables(config_.head_dim, config_.rope_theta,
                                          config_.rope_scaling)),
        q_dim_(static_cast<std::int64_t>(config_.num_heads) * config_.head_dim),
        kv_dim_(static_cast<std::int64_t>(config_.num_kv_heads) * config_.head_dim),
        attn_scale_(1.0f / std::sqrt(static_cast<float>(config_.head_dim)) *
                    rope_.softmax_scale_factor),
        x_(backend),
        xb_(backend),
        q_(backend),
        k_(backend),
        v_(backend),
        att_(backend),
        gate_(backend),
        up_(backend),
        cos_(backend),
        sin_(backend),
        out_rows_(backend),
        out_logits_(backend) {}

  const ModelConfig& config() const override { return config_.base; }
  KvLayout kv_layout() const override {
    return {config_.base.num_layers, static_cast<int>(2 * kv_dim_)};
  }

  absl::Status Forward(std::span<const SequenceChunk> batch, const KvStorage& kv,
                       std::vector<float>* logits) override;

 private:
  void ReserveScratch(std::int64_t tokens);
  void Layer(int l, std::span<const SequenceChunk> batch, std::span<const ChunkRows> rows,
             const KvStorage& kv, std::int64_t tokens);
  void Logits(std::span<const SequenceChunk> batch, std::span<const ChunkRows> rows,
              std::vector<float>* logits);

  LlamaConfig config_;
  LlamaWeights weights_;
  std::vector<MappedFile> storage_;
  std::vector<kernels::PanelWeight> packed_;  // the matrices weights_ points at when packed
  kernels::Backend* backend_;
  internal::RopeTables rope_;
  std::int64_t q_dim_;
  std::int64_t kv_dim_;
  float attn_scale_;

  // Activations, [tokens][width]; not thread-safe: one Forward at a time per model.
  ScratchBuffer x_, xb_, q_, k_, v_, att_, gate_, up_, cos_, sin_, out_rows_, out_logits_;
};

void LlamaModel::ReserveScratch(std::int64_t tokens) {
  const std::int64_t dim = config_.base.hidden_size;
  const std::int64_t hidden = config_.intermediate_size;
  const std::int64_t half_rope = config_.head_dim / 2;
  x_.Reserve(tokens * dim);
  xb_.Reserve(tokens * dim);
  q_.Reserve(tokens * q_dim_);
  k_.Reserve(tokens * kv_dim_);
  v_.Reserve(tokens * kv_dim_);
  att_.Reserve(tokens * q_dim_);
  gate_.Reserve(tokens * hidden);
  up_.Reserve(tokens * hidden);
  cos_.Reserve(tokens * half_rope);
  sin_.Reserve(tokens * half_rope);
}

absl::Status LlamaModel::Forward(std::span<const SequenceChunk> batch, const KvStorage& kv,
                                 std::vector<float>* logits) {
  TANDEM_RETURN_IF_ERROR(internal::ValidateBatch(batch, kv, config_.base, kv_layout()));
  if (logits == nullptr) {
    for (const SequenceChunk& c : batch) {
      if (c.logits != LogitsMode::kNone) {
        return absl::InvalidArgumentError("logits requested but no output vector given");
      }
    }
  }

  std::vector<ChunkRows> rows;
  rows.reserve(batch.size());
  std::int64_t tokens = 0;
  std::vector<int> positions;
  for (const SequenceChunk& c : batch) {
    rows.push_back({tokens, static_cast<std::int64_t>(c.tokens.size())});
    tokens += static_cast<std::int64_t>(c.tokens.size());
    for (std::size_t t = 0; t < c.tokens.size(); ++t) {
      positions.push_back(c.start_pos + static_cast<int>(t));
    }
  }
  if (tokens == 0) return absl::OkStatus();

  ReserveScratch(tokens);
  internal::FillCosSin(rope_, positions, cos_.data(), sin_.data());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    internal::EmbedChunk(*backend_, weights_.embed, batch[i], config_.base.hidden_size,
                         x_.data() + rows[i].first_row * config_.base.hidden_size);
  }
  for (int l = 0; l < config_.base.num_layers; ++l) Layer(l, batch, rows, kv, tokens);
  Logits(batch, rows, logits);
  return absl::OkStatus();
}

void LlamaModel::Layer(int l, std::span<const SequenceChunk> batch, std::span<const ChunkRows> rows,
                       const KvStorage& kv, std::int64_t tokens) {
  const LlamaLayerWeights& w = weights_.layers[l];
  const std::int64_t dim = config_.base.hidden_size;
  const int head_dim = config_.head_dim;
  kernels::Backend& be = *backend_;

  be.RmsNorm(x_.data(), tokens, dim, w.attn_norm, config_.rms_norm_eps, xb_.data());
  if (!w.w_qkv.empty()) {
    const std::int64_t part_rows[] = {q_dim_, kv_dim_, kv_dim_};
    float* const outputs[] = {q_.data(), k_.data(), v_.data()};
    be.StackedMatMul(xb_.data(), tokens, w.w_qkv, part_rows, outputs);
  } else {
    be.MatMul(xb_.data(), tokens, w.wq, q_.data());
    be.MatMul(xb_.data(), tokens, w.wk, k_.data());
    be.MatMul(xb_.data(), tokens, w.wv, v_.data());
  }
  be.Rope(q_.data(), tokens, config_.num_heads, head_dim, head_dim, cos_.data(), sin_.data(),
          config_.rope_layout);
  be.Rope(k_.data(), tokens, config_.num_kv_heads, head_dim, head_dim, cos_.data(), sin_.data(),
          config_.rope_layout);

  // Every chunk's K/V goes into the cache before any attention reads it. The rows are scattered
  // over the paged pool; the backend's memory is host-addressable (see LoadModel).
  for (std::size_t c = 0; c < batch.size(); ++c) {
    const kernels::PagedKvLayer cache = kv.Layer(l, batch[c].block_table);
    for (std::int64_t t = 0; t < rows[c].count; ++t) {
      float* dst = cache.TokenRow(batch[c].start_pos + t);
      const std::int64_t row = rows[c].first_row + t;
      std::memcpy(dst, k_.data() + row * kv_dim_, kv_dim_ * sizeof(float));
      std::memcpy(dst + kv_dim_, v_.data() + row * kv_dim_, kv_dim_ * sizeof(float));
    }
  }
  // One backend call for the whole batch: a single decode token per sequence is too little work
  // to be worth threading on its own.
  std::vector<kernels::GqaAttentionParams> attention(batch.size());
  for (std::size_t c = 0; c < batch.size(); ++c) {
    kernels::GqaAttentionParams& p = attention[c];
    p.q = q_.data() + rows[c].first_row * q_dim_;
    p.out = att_.data() + rows[c].first_row * q_dim_;
    p.n_tokens = static_cast<int>(rows[c].count);
    p.start_pos = batch[c].start_pos;
    p.n_heads = config_.num_heads;
    p.n_kv_heads = config_.num_kv_heads;
    p.head_dim = head_dim;
    p.scale = attn_scale_;
    p.kv = kv.Layer(l, batch[c].block_table);
    p.k_offset = 0;
    p.v_offset = static_cast<int>(kv_dim_);
  }
  be.GqaAttentionBatch(attention);
  be.MatMul(att_.data(), tokens, w.wo, xb_.data());
  be.Axpy(1.0f, xb_.data(), tokens * dim, x_.data());

  // SwiGLU feed-forward: w_down(silu(w_gate x) * w_up x).
  be.RmsNorm(x_.data(), tokens, dim, w.ffn_norm, config_.rms_norm_eps, xb_.data());
  if (!w.w_gate_up.empty()) {
    be.GatedMatMul(xb_.data(), tokens, w.w_gate_up, config_.intermediate_size, gate_.data());
  } else {
    be.MatMul(xb_.data(), tokens, w.w_gate, gate_.data());
    be.MatMul(xb_.data(), tokens, w.w_up, up_.data());
    be.SiluMul(gate_.data(), up_.data(), tokens, config_.intermediate_size, gate_.data());
  }
  be.MatMul(gate_.data(), tokens, w.w_down, xb_.data());
  be.Axpy(1.0f, xb_.data(), tokens * dim, x_.data());
}

void LlamaModel::Logits(std::span<const SequenceChunk> batch, std::span<const ChunkRows> rows,
                        std::vector<float>* logits) {
  // Only the rows that need logits go through the final norm and the classifier.
  std::vector<ChunkRows> wanted;
  std::int64_t out_rows = 0;
  for (std::size_t c = 0; c < batch.size(); ++c) {
    if (batch[c].logits == LogitsMode::kAll) {
      wanted.push_back(rows[c]);
    } else if (batch[c].logits == LogitsMode::kLast) {
      wanted.push_back({rows[c].first_row + rows[c].count - 1, 1});
    } else {
      continue;
    }
    out_rows += wanted.back().count;
  }
  if (out_rows == 0) return;

  const std::int64_t dim = config_.base.hidden_size;
  const std::int64_t vocab = config_.base.vocab_size;
  float* normed = out_rows_.Reserve(out_rows * dim);
  float* out = out_logits_.Reserve(out_rows * vocab);
  std::int64_t next = 0;
  for (const ChunkRows& r : wanted) {
    backend_->RmsNorm(x_.data() + r.first_row * dim, r.count, dim, weights_.final_norm,
                      config_.rms_norm_eps, normed + next * dim);
    next += r.count;
  }
  backend_->MatMul(normed, out_rows, weights_.lm_head, out);
  logits->insert(logits->end(), out, out + out_rows * vocab);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateLlamaModel(LlamaConfig config, LlamaWeights weights,
                                                        std::vector<MappedFile> storage,
                                                        kernels::Backend* backend) {
  if (backend == nullptr) return absl::InvalidArgumentError("CreateLlamaModel: no backend");
  if (weights.lm_head.empty()) weights.lm_head = weights.embed;  // tied classifier
  TANDEM_RETURN_IF_ERROR(ValidateConfig(config, weights.layers.size()));
  TANDEM_RETURN_IF_ERROR(ValidateWeights(config, weights));
  config.base.arch = Architecture::kLlama;
  // The matrices in the backend's MatMul layout, packed once here; the embedding table stays
  // row-major for Embed (a tied classifier gets a packed copy of its own).
  internal::PackedWeights packed(*backend);
  for (LlamaLayerWeights& l : weights.layers) {
    packed.Pack({&l.wo, &l.w_down});
    l.w_qkv = {};
    if (!packed.PackStacked({l.wq, l.wk, l.wv}, &l.w_qkv)) packed.Pack({&l.wq, &l.wk, &l.wv});
    l.w_gate_up = {};
    if (!packed.PackGated(l.w_gate, l.w_up, &l.w_gate_up)) packed.Pack({&l.w_gate, &l.w_up});
  }
  packed.Pack(weights.lm_head);
  return std::unique_ptr<Model>(new LlamaModel(std::move(config), std::move(weights),
                                               std::move(storage), std::move(packed).Take(),
                                               backend));
}

}  // namespace tandem::model
