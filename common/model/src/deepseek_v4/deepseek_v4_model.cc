// DeepSeek-V4 forward, following transformers' modeling_deepseek_v4 (see deepseek_v4.h).
// Projections, norms and the embedding run on the Backend; the V4-specific glue (sinks, window
// compression, indexer top-k, hyper-connections, routing) runs on the host in float32, so the
// backend must read host memory (the CPU backend).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/weight_packing.h"
#include "deepseek_v4/deepseek_v4_loader.h"
#include "deepseek_v4/deepseek_v4_ops.h"
#include "input_embeddings.h"
#include "rope.h"
#include "tandem/base/status_macros.h"
#include "tandem/model/deepseek_v4.h"

namespace tandem::model {

KvLayout DeepseekV4KvLayout(const DeepseekV4Config& c) {
  int widest = 0;
  for (int i = 0; i < c.base.num_layers; ++i) {
    int row = c.head_dim;
    if (c.compress_rate(i) > 0) row += 2 * c.compressor_width(i) + c.head_dim;
    if (c.attention_kinds[i] == DeepseekV4AttentionKind::kCompressedSparse) {
      row += 5 * c.index_head_dim;
    }
    widest = std::max(widest, row);
  }
  return KvLayout{c.base.num_layers, widest};
}

namespace {

using internal::v4::CompressWindow;
using internal::v4::HyperMix;
using internal::v4::HyperParams;
using internal::v4::RmsNorm;
using internal::v4::RopeTail;
using internal::v4::WindowRows;

// Offsets of one layer's fields inside its cache row (deepseek_v4.h).
struct RowLayout {
  int comp_kv = 0, comp_gate = 0, comp_entry = 0, idx_kv = 0, idx_gate = 0, idx_entry = 0;
};

// One sequence's cache rows for one forward.
class SequenceCache {
 public:
  SequenceCache(const KvStorage& kv, std::span<const std::int32_t> table)
      : kv_(kv), table_(table) {}
  float* Row(int layer, int pos) const {
    const std::int32_t block = table_[pos / kv_.block_size];
    return kv_.base + block * kv_.block_stride() + layer * kv_.layer_stride() +
           static_cast<std::int64_t>(pos % kv_.block_size) * kv_.floats_per_token;
  }

 private:
  const KvStorage& kv_;
  std::span<const std::int32_t> table_;
};

class DeepseekV4ModelImpl : public Model {
 public:
  DeepseekV4ModelImpl(DeepseekV4Config config, DeepseekV4Weights weights,
                      std::vector<MappedFile> storage, std::vector<kernels::PanelWeight> packed,
                      kernels::Backend* backend)
      : be_(backend),
        config_(std::move(config)),
        weights_(std::move(weights)),
        storage_(std::move(storage)),
        packed_(std::move(packed)),
        layout_(DeepseekV4KvLayout(config_)) {
    main_inv_freq_ =
        internal::ComputeRopeTables(config_.rope_dim, config_.rope_theta, RopeScaling{}).inv_freq;
    compress_inv_freq_ = internal::ComputeRopeTables(config_.rope_dim, config_.compress_rope_theta,
                                                     config_.compress_rope_scaling)
                             .inv_freq;
    hyper_.streams = config_.hc_mult;
    hyper_.hidden = config_.base.hidden_size;
    hyper_.sinkhorn_iters = config_.hc_sinkhorn_iters;
    hyper_.eps = config_.hc_eps;
    hyper_.norm_eps = config_.rms_norm_eps;
    rows_.resize(config_.base.num_layers);
    for (int i = 0; i < config_.base.num_layers; ++i) {
      RowLayout& r = rows_[i];
      r.comp_kv = config_.head_dim;
      r.comp_gate = r.comp_kv + config_.compressor_width(i);
      r.comp_entry = r.comp_gate + config_.compressor_width(i);
      r.idx_kv = r.comp_entry + config_.head_dim;
      r.idx_gate = r.idx_kv + 2 * config_.index_head_dim;
      r.idx_entry = r.idx_gate + 2 * config_.index_head_dim;
    }
  }

  const ModelConfig& config() const override { return config_.base; }
  KvLayout kv_layout() const override { return layout_; }

  absl::Status Forward(std::span<const SequenceChunk> batch, const KvStorage& kv,
                       std::vector<float>* logits) override {
    if (kv.num_layers != layout_.num_layers || kv.floats_per_token != layout_.floats_per_token ||
        kv.base == nullptr || kv.block_size <= 0) {
      return absl::InvalidArgumentError("KV storage does not match the model's KV layout");
    }
    for (const SequenceChunk& c : batch) TANDEM_RETURN_IF_ERROR(CheckChunk(c, kv));
    for (const SequenceChunk& c : batch) ForwardChunk(c, SequenceCache(kv, c.block_table), logits);
    return absl::OkStatus();
  }

 private:
  absl::Status CheckChunk(const SequenceChunk& c, const KvStorage& kv) const {
    if (c.start_pos < 0) return absl::InvalidArgumentError("negative start_pos");
    if (c.tokens.empty()) return absl::InvalidArgumentError("empty chunk");
    TANDEM_RETURN_IF_ERROR(internal::CheckTokensAndEmbeddings(c, config_.base.vocab_size));
    const std::int64_t end = c.start_pos + static_cast<std::int64_t>(c.tokens.size());
    if (end > static_cast<std::int64_t>(c.block_table.size()) * kv.block_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("block table covers fewer than ", end, " tokens"));
    }
    for (std::int32_t b : c.block_table) {
      if (b < 0 || b >= kv.num_blocks) {
        return absl::InvalidArgumentError(absl::StrCat("block id ", b, " out of range"));
      }
    }
    return absl::OkStatus();
  }

  void ForwardChunk(const SequenceChunk& c, const SequenceCache& cache,
                    std::vector<float>* logits) const {
    const int n = static_cast<int>(c.tokens.size());
    const int h = config_.base.hidden_size, hs = config_.hc_mult * h;
    const float eps = config_.rms_norm_eps;
    std::vector<float> x(static_cast<std::size_t>(n) * h), out(x.size()), collapsed(x.size());
    internal::EmbedChunk(*be_, weights_.embed, c, h, x.data());
    // Hash-routed experts read ids: an image's positions route as its placeholder token.
    const std::vector<std::int32_t> model_tokens = internal::ModelTokens(c);
    std::vector<float> streams(static_cast<std::size_t>(n) * hs);
    for (int t = 0; t < n; ++t) {
      for (int s = 0; s < config_.hc_mult; ++s) {
        std::copy_n(&x[t * h], h, &streams[t * hs + s * h]);
      }
    }
    std::vector<HyperMix> mixes(n);
    for (int l = 0; l < config_.base.num_layers; ++l) {
      const DeepseekV4LayerWeights& w = weights_.layers[l];
      for (int t = 0; t < n; ++t) {
        mixes[t] = internal::v4::HyperPre(be_, hyper_, &streams[t * hs], w.hc_attn_fn,
                                          w.hc_attn_base, w.hc_attn_scale, &collapsed[t * h]);
      }
      be_->RmsNorm(collapsed.data(), n, h, w.attn_norm, eps, x.data());
      Attention(l, c.start_pos, n, x, cache, &out);
      for (int t = 0; t < n; ++t) {
        internal::v4::HyperPost(hyper_, mixes[t], &out[t * h], &streams[t * hs]);
        mixes[t] = internal::v4::HyperPre(be_, hyper_, &streams[t * hs], w.hc_ffn_fn, w.hc_ffn_base,
                                          w.hc_ffn_scale, &collapsed[t * h]);
      }
      be_->RmsNorm(collapsed.data(), n, h, w.ffn_norm, eps, x.data());
      for (int t = 0; t < n; ++t) {
        Moe(w, model_tokens[t], &x[t * h], &out[t * h]);
        internal::v4::HyperPost(hyper_, mixes[t], &out[t * h], &streams[t * hs]);
      }
    }
    if (c.logits == LogitsMode::kNone) return;
    const int first = c.logits == LogitsMode::kLast ? n - 1 : 0, rows = n - first;
    for (int t = first; t < n; ++t) {
      internal::v4::HyperHead(be_, hyper_, &streams[t * hs], weights_.hc_head_fn,
                              weights_.hc_head_base, weights_.hc_head_scale,
                              &collapsed[(t - first) * h]);
    }
    be_->RmsNorm(collapsed.data(), rows, h, weights_.final_norm, eps, x.data());
    const std::size_t at = logits->size();
    logits->resize(at + static_cast<std::size_t>(rows) * config_.base.vocab_size);
    be_->MatMul(x.data(), rows, weights_.lm_head, logits->data() + at);
  }

  // Entry e of layer l (the attention's or, with `indexer`, the indexer's) lives in the cache row
  // of its window's last token, written by the forward that completed the window.
  float* Entry(int l, int e, bool indexer, const SequenceCache& cache) const {
    const int rate = config_.compress_rate(l);
    return cache.Row(l, (e + 1) * rate - 1) + (indexer ? rows_[l].idx_entry : rows_[l].comp_entry);
  }

  // Pools entries [begin, end) of layer l from the raw projections in their windows' rows.
  void WriteEntries(int l, int begin, int end, bool indexer, const SequenceCache& cache) const {
    const DeepseekV4LayerWeights& w = weights_.layers[l];
    const int rate = config_.compress_rate(l);
    const bool overlapping =
        config_.attention_kinds[l] == DeepseekV4AttentionKind::kCompressedSparse;
    const int dim = indexer ? config_.index_head_dim : config_.head_dim;
    const DeepseekV4CompressorWeights& cw = indexer ? w.indexer_compressor : w.compressor;
    const int kv_off = indexer ? rows_[l].idx_kv : rows_[l].comp_kv;
    const int gate_off = indexer ? rows_[l].idx_gate : rows_[l].comp_gate;
    auto window = [&](int e) {
      WindowRows r;
      for (int j = 0; j < rate; ++j) {
        const float* row = cache.Row(l, e * rate + j);
        r.kv.push_back(row + kv_off);
        r.gate.push_back(row + gate_off);
      }
      return r;
    };
    for (int e = begin; e < end; ++e) {
      const WindowRows previous = overlapping && e > 0 ? window(e - 1) : WindowRows{};
      CompressWindow(previous, window(e), overlapping, dim, cw.ape, cw.norm, config_.rms_norm_eps,
                     compress_inv_freq_, e * rate, Entry(l, e, indexer, cache));
    }
  }

  // Lightning indexer: the top index_topk of the `visible` compressed entries for one query.
  std::vector<int> SelectEntries(const DeepseekV4LayerWeights& w, const float* x,
                                 const float* q_residual, int pos, int layer, int visible,
                                 const SequenceCache& cache) const {
    const int heads = config_.index_n_heads, dim = config_.index_head_dim;
    std::vector<float> q(static_cast<std::size_t>(heads) * dim), weight(heads);
    be_->MatMul(q_residual, 1, w.indexer_q_b, q.data());
    for (int hd = 0; hd < heads; ++hd) RopeTail(&q[hd * dim], dim, compress_inv_freq_, pos, false);
    be_->MatMul(x, 1, w.indexer_weights, weight.data());
    const float weight_scale = 1.0f / std::sqrt(static_cast<float>(heads));
    const float score_scale = 1.0f / std::sqrt(static_cast<float>(dim));
    std::vector<float> score(visible);
    for (int e = 0; e < visible; ++e) {
      const float* key = Entry(layer, e, /*indexer=*/true, cache);
      float total = 0.0f;
      for (int hd = 0; hd < heads; ++hd) {
        float dot = 0.0f;
        for (int d = 0; d < dim; ++d) dot += q[hd * dim + d] * key[d];
        total += std::max(dot, 0.0f) * score_scale * (weight[hd] * weight_scale);
      }
      score[e] = total;
    }
    std::vector<int> order(visible);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return score[a] > score[b]; });
    order.resize(std::min(visible, config_.index_topk));
    return order;
  }

  void Attention(int l, int start, int n, const std::vector<float>& x, const SequenceCache& cache,
                 std::vector<float>* out) const {
    const DeepseekV4LayerWeights& w = weights_.layers[l];
    const DeepseekV4AttentionKind kind = config_.attention_kinds[l];
    const std::vector<float>& inv_freq =
        kind == DeepseekV4AttentionKind::kSliding ? main_inv_freq_ : compress_inv_freq_;
    const int h = config_.base.hidden_size, d = config_.head_dim, heads = config_.num_heads;
    const int qr = config_.q_lora_rank, rate = config_.compress_rate(l);
    const float eps = config_.rms_norm_eps;
    std::vector<float> q_res(static_cast<std::size_t>(n) * qr);
    std::vector<float> q(static_cast<std::size_t>(n) * heads * d);
    std::vector<float> kv(static_cast<std::size_t>(n) * d);
    be_->MatMul(x.data(), n, w.q_a, q_res.data());
    be_->RmsNorm(q_res.data(), n, qr, w.q_norm, eps, q_res.data());
    be_->MatMul(q_res.data(), n, w.q_b, q.data());
    be_->MatMul(x.data(), n, w.kv, kv.data());
    be_->RmsNorm(kv.data(), n, d, w.kv_norm, eps, kv.data());
    for (int t = 0; t < n; ++t) {
      const int pos = start + t;
      float* qt = &q[static_cast<std::size_t>(t) * heads * d];
      for (int hd = 0; hd < heads; ++hd) {
        RmsNorm(qt + hd * d, d, nullptr, eps, qt + hd * d);
        RopeTail(qt + hd * d, d, inv_freq, pos, false);
      }
      float* row = cache.Row(l, pos);
      std::copy_n(&kv[t * d], d, row);
      RopeTail(row, d, inv_freq, pos, false);
    }
    // The compressors' raw projections go to the cache rows; entries are pooled from there.
    auto project_to_rows = [&](const kernels::WeightView& weight, int offset) {
      std::vector<float> y(static_cast<std::size_t>(n) * weight.rows);
      be_->MatMul(x.data(), n, weight, y.data());
      for (int t = 0; t < n; ++t) {
        std::copy_n(&y[t * weight.rows], weight.rows, cache.Row(l, start + t) + offset);
      }
    };
    if (rate > 0) {
      project_to_rows(w.compressor.kv, rows_[l].comp_kv);
      project_to_rows(w.compressor.gate, rows_[l].comp_gate);
    }
    if (kind == DeepseekV4AttentionKind::kCompressedSparse) {
      project_to_rows(w.indexer_compressor.kv, rows_[l].idx_kv);
      project_to_rows(w.indexer_compressor.gate, rows_[l].idx_gate);
    }
    if (rate > 0) {  // the windows this chunk completes
      WriteEntries(l, start / rate, (start + n) / rate, /*indexer=*/false, cache);
      if (kind == DeepseekV4AttentionKind::kCompressedSparse) {
        WriteEntries(l, start / rate, (start + n) / rate, /*indexer=*/true, cache);
      }
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const int group_in = heads * d / config_.o_groups, olr = config_.o_lora_rank;
    std::vector<const float*> keys;
    std::vector<float> probs, attn(static_cast<std::size_t>(heads) * d),
        mid(static_cast<std::size_t>(n) * config_.o_groups * olr);
    for (int t = 0; t < n; ++t) {
      const int pos = start + t;
      keys.clear();
      for (int p = std::max(0, pos - config_.sliding_window + 1); p <= pos; ++p) {
        keys.push_back(cache.Row(l, p));
      }
      const int visible = rate > 0 ? (pos + 1) / rate : 0;
      if (kind == DeepseekV4AttentionKind::kHeavilyCompressed) {
        for (int e = 0; e < visible; ++e) keys.push_back(Entry(l, e, false, cache));
      } else if (kind == DeepseekV4AttentionKind::kCompressedSparse) {
        for (int e : SelectEntries(w, &x[t * h], &q_res[t * qr], pos, l, visible, cache)) {
          keys.push_back(Entry(l, e, /*indexer=*/false, cache));
        }
      }
      const float* qt = &q[static_cast<std::size_t>(t) * heads * d];
      probs.resize(keys.size());
      for (int hd = 0; hd < heads; ++hd) {
        const float sink = w.sinks.At(0, hd);
        float mx = sink;
        for (std::size_t k = 0; k < keys.size(); ++k) {
          float dot = 0.0f;
          for (int i = 0; i < d; ++i) dot += qt[hd * d + i] * keys[k][i];
          probs[k] = dot * scale;
          mx = std::max(mx, probs[k]);
        }
        float sum = std::exp(sink - mx);
        for (float& p : probs) sum += (p = std::exp(p - mx));
        float* o = &attn[hd * d];
        std::fill(o, o + d, 0.0f);
        for (std::size_t k = 0; k < keys.size(); ++k) {
          const float pk = probs[k] / sum;
          for (int i = 0; i < d; ++i) o[i] += pk * keys[k][i];
        }
        RopeTail(o, d, inv_freq, pos, /*inverse=*/true);
      }
      // Grouped output projection: group g's heads go through its own slice of o_a.
      float* mid_t = &mid[static_cast<std::size_t>(t) * config_.o_groups * olr];
      for (int g = 0; g < config_.o_groups; ++g) {
        be_->MatMul(&attn[g * group_in], 1, w.o_a.RowSlice(static_cast<std::int64_t>(g) * olr, olr),
                    mid_t + g * olr);
      }
    }
    be_->MatMul(mid.data(), n, w.o_b, out->data());
  }

  void Moe(const DeepseekV4LayerWeights& w, std::int32_t token, const float* x, float* out) const {
    const int experts = config_.n_routed_experts, k = config_.num_experts_per_tok;
    const int h = config_.base.hidden_size;
    std::vector<float> score(experts);
    be_->MatMul(x, 1, w.router, score.data());
    for (float& s : score) {
      const float softplus = s > 20.0f ? s : std::log1p(std::exp(s));
      s = std::sqrt(softplus);
    }
    std::vector<int> chosen(k);
    if (!w.hash_table.empty()) {
      for (int j = 0; j < k; ++j) chosen[j] = w.hash_table[static_cast<std::size_t>(token) * k + j];
    } else {
      std::vector<int> order(experts);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return score[a] + w.router_bias.At(0, a) > score[b] + w.router_bias.At(0, b);
      });
      std::copy(order.begin(), order.begin() + k, chosen.begin());
    }
    float total = 0.0f;
    for (int e : chosen) total += score[e];
    std::vector<float> scratch, expert_out(h);
    internal::v4::SwiGluMlp(be_, w.shared.gate, w.shared.up, w.shared.down, config_.swiglu_limit, x,
                            out, &scratch);
    for (int e : chosen) {
      const DeepseekV4MlpWeights& m = w.experts[e];
      internal::v4::SwiGluMlp(be_, m.gate, m.up, m.down, config_.swiglu_limit, x, expert_out.data(),
                              &scratch);
      const float weight = score[e] / (total + 1e-20f) * config_.routed_scaling_factor;
      for (int d = 0; d < h; ++d) out[d] += weight * expert_out[d];
    }
  }

  kernels::Backend* be_;
  DeepseekV4Config config_;
  DeepseekV4Weights weights_;
  std::vector<MappedFile> storage_;
  std::vector<kernels::PanelWeight> packed_;  // what the packed views in weights_ point into
  KvLayout layout_;
  std::vector<float> main_inv_freq_, compress_inv_freq_;
  HyperParams hyper_;
  std::vector<RowLayout> rows_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateDeepseekV4Model(DeepseekV4Config config,
                                                             DeepseekV4Weights weights,
                                                             std::vector<MappedFile> storage,
                                                             kernels::Backend* backend) {
  if (backend == nullptr) return absl::InvalidArgumentError("DeepSeek-V4 needs a backend");
  TANDEM_RETURN_IF_ERROR(internal::ValidateDeepseekV4Config(config));
  if (static_cast<int>(weights.layers.size()) != config.base.num_layers) {
    return absl::InvalidArgumentError("DeepSeek-V4 weights: wrong number of layers");
  }
  // The matrices only MatMul reads, in the backend's MatMul layout, packed once here (FP8 too, so
  // that an FP8 checkpoint keeps its dequantised twin's bits). Not packed: o_a (multiplied group
  // by group as row slices), the hyper-connection mixes, embeddings, norms, biases and sinks.
  internal::PackedWeights packed(*backend);
  auto pack_mlp = [&](DeepseekV4MlpWeights& m) { packed.Pack({&m.gate, &m.up, &m.down}); };
  for (DeepseekV4LayerWeights& l : weights.layers) {
    packed.Pack({&l.q_a, &l.q_b, &l.kv, &l.o_b, &l.compressor.kv, &l.compressor.gate,
                 &l.indexer_compressor.kv, &l.indexer_compressor.gate, &l.indexer_q_b,
                 &l.indexer_weights, &l.router});
    pack_mlp(l.shared);
    for (DeepseekV4MlpWeights& e : l.experts) pack_mlp(e);
  }
  packed.Pack(weights.lm_head);
  return std::unique_ptr<Model>(new DeepseekV4ModelImpl(std::move(config), std::move(weights),
                                                        std::move(storage),
                                                        std::move(packed).Take(), backend));
}

}  // namespace tandem::model
