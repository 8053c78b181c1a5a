// DeepSeek-V3 forward over the kernels::Backend interface. Activations live in host vectors
// (the CPU backend's memory space); heavy math goes through backend ops, only the per-token MoE
// routing and row gathers/scatters run on the host.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/weight_packing.h"
#include "deepseek_v3/deepseek_v3_attention.h"
#include "deepseek_v3/deepseek_v3_router.h"
#include "deepseek_v3/deepseek_v3_weights.h"
#include "tandem/base/status_macros.h"
#include "tandem/model/deepseek_v3.h"

namespace tandem::model {
namespace {

using kernels::WeightView;

using internal::MlaChunk;

// Per-layer tensors derived once at load.
struct LayerExtras {
  std::vector<float> router_bias;
  internal::MlaAbsorbedWeights absorbed;
};

std::vector<float> ToFloats(const WeightView& w) {
  std::vector<float> out(w.numel());
  for (std::int64_t i = 0; i < w.numel(); ++i) out[i] = w.At(i / w.cols, i % w.cols);
  return out;
}

class DeepseekV3ModelImpl final : public DeepseekV3Model {
 public:
  DeepseekV3ModelImpl(DeepseekV3Config config, DeepseekV3Weights weights,
                      std::vector<MappedFile> storage, std::vector<kernels::PanelWeight> packed,
                      const DeepseekV3Options& options, kernels::Backend* backend)
      : cfg_(std::move(config)),
        w_(std::move(weights)),
        storage_(std::move(storage)),
        packed_(std::move(packed)),
        be_(backend),
        attention_(cfg_, options.mla_absorbed, backend) {
    for (const auto& l : w_.layers) extras_.push_back(MakeExtras(l));
    for (const auto& m : w_.mtp) mtp_extras_.push_back(MakeExtras(m.block));
  }

  const ModelConfig& config() const override { return cfg_.base; }
  const DeepseekV3Config& deepseek_config() const override { return cfg_; }
  KvLayout kv_layout() const override { return {cfg_.base.num_layers, FloatsPerToken()}; }
  KvLayout mtp_kv_layout() const override {
    return {static_cast<int>(w_.mtp.size()), w_.mtp.empty() ? 0 : FloatsPerToken()};
  }

  absl::Status Forward(std::span<const SequenceChunk> batch, const KvStorage& kv,
                       std::vector<float>* logits) override {
    return ForwardWithHidden(batch, kv, logits, nullptr);
  }

  absl::Status ForwardWithHidden(std::span<const SequenceChunk> batch, const KvStorage& kv,
                                 std::vector<float>* logits, std::vector<float>* hidden) override {
    TANDEM_RETURN_IF_ERROR(CheckStorage(kv, kv_layout(), "KV storage"));
    std::vector<std::int32_t> tokens;
    std::vector<int> positions, out_rows;
    std::vector<MlaChunk> refs;
    for (const SequenceChunk& c : batch) {
      TANDEM_RETURN_IF_ERROR(CheckChunk(c.tokens, c.start_pos, c.block_table, kv));
      // Its multi-token prediction head re-embeds the tokens, so image rows would not reach it.
      if (!c.embeddings.empty()) {
        return absl::InvalidArgumentError("DeepSeek-V3 models take no input embeddings (images)");
      }
      refs.push_back(
          {static_cast<int>(tokens.size()), static_cast<int>(c.tokens.size()), c.start_pos, {}});
      AppendRows(c.tokens.size(), c.logits, tokens.size(), &out_rows);
      for (std::size_t i = 0; i < c.tokens.size(); ++i) positions.push_back(c.start_pos + i);
      tokens.insert(tokens.end(), c.tokens.begin(), c.tokens.end());
    }
    const int T = static_cast<int>(tokens.size());
    std::vector<float> x(static_cast<std::size_t>(T) * H());
    be_->Embed(w_.embed, tokens.data(), T, x.data());
    for (int l = 0; l < cfg_.base.num_layers; ++l) {
      for (std::size_t i = 0; i < refs.size(); ++i) {
        refs[i].kv = kv.Layer(l, batch[i].block_table);
      }
      RunLayer(w_.layers[l], extras_[l], refs, positions, x.data(), T);
    }
    Head(x, out_rows, w_.final_norm, w_.lm_head, logits, hidden);
    return absl::OkStatus();
  }

  absl::Status ForwardMtp(std::span<const MtpChunk> batch, const KvStorage& mtp_kv,
                          std::vector<float>* logits) override {
    if (w_.mtp.empty()) {
      return absl::FailedPreconditionError("this checkpoint has no MTP layer weights");
    }
    TANDEM_RETURN_IF_ERROR(CheckStorage(mtp_kv, mtp_kv_layout(), "MTP KV storage"));
    const DeepseekV3MtpWeights& m = w_.mtp[0];
    std::vector<std::int32_t> tokens;
    std::vector<float> prev_hidden;
    std::vector<int> positions, out_rows;
    std::vector<MlaChunk> refs;
    for (const MtpChunk& c : batch) {
      TANDEM_RETURN_IF_ERROR(CheckChunk(c.tokens, c.start_pos, c.block_table, mtp_kv));
      if (c.hidden.size() != c.tokens.size() * static_cast<std::size_t>(H())) {
        return absl::InvalidArgumentError(absl::StrCat("MTP chunk has ", c.hidden.size(),
                                                       " hidden floats for ", c.tokens.size(),
                                                       " tokens of hidden size ", H()));
      }
      refs.push_back({static_cast<int>(tokens.size()), static_cast<int>(c.tokens.size()),
                      c.start_pos, mtp_kv.Layer(0, c.block_table)});
      AppendRows(c.tokens.size(), c.logits, tokens.size(), &out_rows);
      // Rotary position of the token that row i embeds (p + 1), as transformers feeds its MTP
      // layer; attention only sees position differences, so the slot offset is immaterial.
      for (std::size_t i = 0; i < c.tokens.size(); ++i) positions.push_back(c.start_pos + i + 1);
      tokens.insert(tokens.end(), c.tokens.begin(), c.tokens.end());
      prev_hidden.insert(prev_hidden.end(), c.hidden.begin(), c.hidden.end());
    }
    const int T = static_cast<int>(tokens.size());
    const int h = H();
    std::vector<float> emb(static_cast<std::size_t>(T) * h),
        both(static_cast<std::size_t>(T) * 2 * h);
    be_->Embed(m.embed.empty() ? w_.embed : m.embed, tokens.data(), T, emb.data());
    be_->RmsNorm(emb.data(), T, h, m.enorm, cfg_.rms_norm_eps, emb.data());
    be_->RmsNorm(prev_hidden.data(), T, h, m.hnorm, cfg_.rms_norm_eps, prev_hidden.data());
    for (int t = 0; t < T; ++t) {  // [enorm(embedding); hnorm(hidden)], DeepSeek's order
      std::copy_n(emb.data() + t * h, h, both.data() + t * 2 * h);
      std::copy_n(prev_hidden.data() + t * h, h, both.data() + t * 2 * h + h);
    }
    std::vector<float> x(static_cast<std::size_t>(T) * h);
    be_->MatMul(both.data(), T, m.eh_proj, x.data());
    RunLayer(m.block, mtp_extras_[0], refs, positions, x.data(), T);
    Head(x, out_rows, m.final_norm, m.head.empty() ? w_.lm_head : m.head, logits, nullptr);
    return absl::OkStatus();
  }

 private:
  int H() const { return cfg_.base.hidden_size; }
  int FloatsPerToken() const { return cfg_.kv_lora_rank + cfg_.qk_rope_head_dim; }

  LayerExtras MakeExtras(const DeepseekV3LayerWeights& l) const {
    LayerExtras e;
    if (!l.router_bias.empty()) e.router_bias = ToFloats(l.router_bias);
    e.absorbed = attention_.PrepareAbsorbed(l);
    return e;
  }

  static void AppendRows(std::size_t n, LogitsMode mode, std::size_t first,
                         std::vector<int>* rows) {
    if (mode == LogitsMode::kAll) {
      for (std::size_t i = 0; i < n; ++i) rows->push_back(static_cast<int>(first + i));
    } else if (mode == LogitsMode::kLast) {
      rows->push_back(static_cast<int>(first + n - 1));
    }
  }

  absl::Status CheckStorage(const KvStorage& kv, const KvLayout& want,
                            absl::string_view what) const {
    if (kv.base == nullptr || kv.block_size <= 0 || kv.num_layers != want.num_layers ||
        kv.floats_per_token != want.floats_per_token) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " does not match the model: needs ", want.num_layers, " layers of ",
                       want.floats_per_token, " floats per token, got ", kv.num_layers,
                       " layers of ", kv.floats_per_token, " (block_size ", kv.block_size, ")"));
    }
    return absl::OkStatus();
  }

  absl::Status CheckChunk(std::span<const std::int32_t> tokens, int start_pos,
                          std::span<const std::int32_t> block_table, const KvStorage& kv) const {
    if (tokens.empty()) return absl::InvalidArgumentError("empty chunk");
    if (start_pos < 0) return absl::InvalidArgumentError("negative start_pos");
    for (std::int32_t t : tokens) {
      if (t < 0 || t >= cfg_.base.vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("token id ", t, " outside the vocabulary of ", cfg_.base.vocab_size));
      }
    }
    const std::int64_t needed = start_pos + static_cast<std::int64_t>(tokens.size());
    if (static_cast<std::int64_t>(block_table.size()) * kv.block_size < needed) {
      return absl::InvalidArgumentError(absl::StrCat("block table covers ",
                                                     block_table.size() * kv.block_size,
                                                     " tokens, chunk needs ", needed));
    }
    for (std::int64_t b = 0; b < (needed + kv.block_size - 1) / kv.block_size; ++b) {
      if (block_table[b] < 0 || block_table[b] >= kv.num_blocks) {
        return absl::InvalidArgumentError(
            absl::StrCat("block id ", block_table[b], " outside the pool of ", kv.num_blocks));
      }
    }
    return absl::OkStatus();
  }

  // Final norm + head for the selected rows.
  void Head(const std::vector<float>& x, const std::vector<int>& rows, const WeightView& norm,
            const WeightView& head, std::vector<float>* logits, std::vector<float>* hidden) {
    const int h = H(), n = static_cast<int>(rows.size());
    if (n == 0) return;
    std::vector<float> sel(static_cast<std::size_t>(n) * h);
    for (int i = 0; i < n; ++i) std::copy_n(x.data() + rows[i] * h, h, sel.data() + i * h);
    be_->RmsNorm(sel.data(), n, h, norm, cfg_.rms_norm_eps, sel.data());
    if (hidden != nullptr) hidden->insert(hidden->end(), sel.begin(), sel.end());
    const std::size_t old = logits->size();
    logits->resize(old + static_cast<std::size_t>(n) * head.rows);
    be_->MatMul(sel.data(), n, head, logits->data() + old);
  }

  void RunLayer(const DeepseekV3LayerWeights& l, const LayerExtras& ex,
                std::span<const MlaChunk> refs, std::span<const int> positions, float* x, int T) {
    const int h = H();
    std::vector<float> normed(static_cast<std::size_t>(T) * h),
        out(static_cast<std::size_t>(T) * h);
    be_->RmsNorm(x, T, h, l.attn_norm, cfg_.rms_norm_eps, normed.data());
    attention_.Forward(l, ex.absorbed, refs, positions, normed.data(), T, out.data());
    be_->Axpy(1.0f, out.data(), static_cast<std::int64_t>(T) * h, x);
    be_->RmsNorm(x, T, h, l.ffn_norm, cfg_.rms_norm_eps, normed.data());
    if (l.experts.empty()) {
      Mlp(l.dense, normed.data(), T, out.data());
    } else {
      Moe(l, ex, normed.data(), T, out.data());
    }
    be_->Axpy(1.0f, out.data(), static_cast<std::int64_t>(T) * h, x);
  }

  void Mlp(const DeepseekV3MlpWeights& m, const float* in, int rows, float* out) {
    const std::int64_t inter = m.gate.rows;
    std::vector<float> gate(rows * inter);
    if (!m.gate_up.empty()) {
      be_->GatedMatMul(in, rows, m.gate_up, inter, gate.data());
    } else {
      std::vector<float> up(rows * inter);
      be_->MatMul(in, rows, m.gate, gate.data());
      be_->MatMul(in, rows, m.up, up.data());
      be_->SiluMul(gate.data(), up.data(), rows, inter, gate.data());
    }
    be_->MatMul(gate.data(), rows, m.down, out);
  }

  // Routed experts (grouped by expert: one gather + MLP per expert) plus shared experts. Each
  // token accumulates its experts in ascending expert order whatever the batch, which keeps
  // results batch-invariant.
  void Moe(const DeepseekV3LayerWeights& l, const LayerExtras& ex, const float* in, int T,
           float* out) {
    const int h = H(), n_exp = cfg_.n_routed_experts, k = cfg_.num_experts_per_tok;
    std::vector<float> router(static_cast<std::size_t>(T) * n_exp);
    be_->MatMul(in, T, l.router, router.data());
    std::vector<std::vector<std::pair<int, float>>> routed(n_exp);
    std::vector<int> experts(k);
    std::vector<float> weights(k);
    for (int t = 0; t < T; ++t) {
      internal::RouteToken(cfg_, {router.data() + t * n_exp, static_cast<std::size_t>(n_exp)},
                           ex.router_bias, experts, weights);
      for (int i = 0; i < k; ++i) routed[experts[i]].push_back({t, weights[i]});
    }
    std::fill(out, out + static_cast<std::size_t>(T) * h, 0.0f);
    std::vector<float> gathered, y;
    for (int e = 0; e < n_exp; ++e) {
      const auto& rows = routed[e];
      if (rows.empty()) continue;
      const int n = static_cast<int>(rows.size());
      gathered.resize(static_cast<std::size_t>(n) * h);
      y.resize(static_cast<std::size_t>(n) * h);
      for (int i = 0; i < n; ++i) std::copy_n(in + rows[i].first * h, h, gathered.data() + i * h);
      Mlp(l.experts[e], gathered.data(), n, y.data());
      for (int i = 0; i < n; ++i)
        be_->Axpy(rows[i].second, y.data() + i * h, h, out + rows[i].first * h);
    }
    if (cfg_.n_shared_experts > 0) {
      std::vector<float> shared(static_cast<std::size_t>(T) * h);
      Mlp(l.shared, in, T, shared.data());
      be_->Axpy(1.0f, shared.data(), static_cast<std::int64_t>(T) * h, out);
    }
  }

  DeepseekV3Config cfg_;
  DeepseekV3Weights w_;
  std::vector<MappedFile> storage_;
  std::vector<kernels::PanelWeight> packed_;  // what the packed views in w_ point into
  kernels::Backend* be_;
  internal::MlaAttention attention_;  // after cfg_: holds a reference to it
  std::vector<LayerExtras> extras_, mtp_extras_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeepseekV3Model>> CreateDeepseekV3Model(
    DeepseekV3Config config, DeepseekV3Weights weights, std::vector<MappedFile> storage,
    const DeepseekV3Options& options, kernels::Backend* backend) {
  if (backend == nullptr) return absl::InvalidArgumentError("no backend");
  TANDEM_RETURN_IF_ERROR(internal::ValidateDeepseekV3Config(config));
  TANDEM_RETURN_IF_ERROR(internal::ValidateDeepseekV3Weights(config, weights));
  // The matrices only MatMul reads, in the backend's MatMul layout, packed once here (FP8 too, so
  // that an FP8 checkpoint keeps its dequantised twin's bits). Not packed: the embedding tables
  // (Embed), kv_b_proj (sliced per head and folded into the absorbed weights), norms and biases.
  // A tied classifier gets a packed copy of its own.
  internal::PackedWeights packed(*backend);
  auto pack_mlp = [&](DeepseekV3MlpWeights& m) {
    m.gate_up = {};
    if (!packed.PackGated(m.gate, m.up, &m.gate_up)) packed.Pack({&m.gate, &m.up});
    packed.Pack(m.down);
  };
  auto pack_layer = [&](DeepseekV3LayerWeights& l) {
    l.q_kv_a = {};
    if (l.q_proj.empty() && packed.PackStacked({l.q_a_proj, l.kv_a_proj}, &l.q_kv_a)) {
      l.q_a_proj = l.kv_a_proj = {};  // read through q_kv_a only
    }
    packed.Pack({&l.q_proj, &l.q_a_proj, &l.q_b_proj, &l.kv_a_proj, &l.o_proj, &l.router});
    pack_mlp(l.dense);
    pack_mlp(l.shared);
    for (DeepseekV3MlpWeights& e : l.experts) pack_mlp(e);
  };
  for (DeepseekV3LayerWeights& l : weights.layers) pack_layer(l);
  for (DeepseekV3MtpWeights& m : weights.mtp) {
    pack_layer(m.block);
    packed.Pack({&m.eh_proj, &m.head});
  }
  packed.Pack(weights.lm_head);
  return std::unique_ptr<DeepseekV3Model>(
      new DeepseekV3ModelImpl(std::move(config), std::move(weights), std::move(storage),
                              std::move(packed).Take(), options, backend));
}

}  // namespace tandem::model
