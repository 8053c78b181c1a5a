#include "deepseek_v3/deepseek_v3_attention.h"

#include <algorithm>
#include <cmath>

namespace tandem::model::internal {

MlaAttention::MlaAttention(const DeepseekV3Config& config, bool absorbed, kernels::Backend* backend)
    : cfg_(config), absorbed_(absorbed), be_(backend) {
  rope_ = ComputeRopeTables(cfg_.qk_rope_head_dim, cfg_.rope_theta, cfg_.rope_scaling);
  softmax_scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(cfg_.qk_head_dim())) *
                                      rope_.softmax_scale_factor);
}

MlaAbsorbedWeights MlaAttention::PrepareAbsorbed(const DeepseekV3LayerWeights& l) const {
  MlaAbsorbedWeights w;
  const int dn = cfg_.qk_nope_head_dim, dv = cfg_.v_head_dim, r = cfg_.kv_lora_rank;
  for (int head = 0; head < cfg_.num_heads; ++head) {
    std::vector<float> t(static_cast<std::size_t>(r) * dn);
    for (int d = 0; d < dn; ++d) {
      for (int c = 0; c < r; ++c) t[c * dn + d] = l.kv_b_proj.At(head * (dn + dv) + d, c);
    }
    w.uk_t.push_back(std::move(t));
  }
  return w;
}

void MlaAttention::Forward(const DeepseekV3LayerWeights& l, const MlaAbsorbedWeights& ex,
                           std::span<const MlaChunk> refs, std::span<const int> positions,
                           const float* in, int T, float* out) const {
  const int nh = cfg_.num_heads, dn = cfg_.qk_nope_head_dim, dr = cfg_.qk_rope_head_dim;
  const int qk = cfg_.qk_head_dim(), dv = cfg_.v_head_dim, r = cfg_.kv_lora_rank;
  const int row = r + dr;
  std::vector<float> q(static_cast<std::size_t>(T) * nh * qk);
  // kv rows are exactly what the cache stores: [normalised latent | rotated rope key].
  std::vector<float> kv(static_cast<std::size_t>(T) * row);
  if (l.q_proj.empty()) {
    std::vector<float> qa(static_cast<std::size_t>(T) * cfg_.q_lora_rank);
    if (!l.q_kv_a.empty()) {
      const std::int64_t part_rows[] = {cfg_.q_lora_rank, row};
      float* const outputs[] = {qa.data(), kv.data()};
      be_->StackedMatMul(in, T, l.q_kv_a, part_rows, outputs);
    } else {
      be_->MatMul(in, T, l.q_a_proj, qa.data());
      be_->MatMul(in, T, l.kv_a_proj, kv.data());
    }
    be_->RmsNorm(qa.data(), T, cfg_.q_lora_rank, l.q_a_norm, cfg_.latent_norm_eps, qa.data());
    be_->MatMul(qa.data(), T, l.q_b_proj, q.data());
  } else {
    be_->MatMul(in, T, l.q_proj, q.data());
    be_->MatMul(in, T, l.kv_a_proj, kv.data());
  }
  for (int t = 0; t < T; ++t) {
    be_->RmsNorm(kv.data() + t * row, 1, r, l.kv_a_norm, cfg_.latent_norm_eps, kv.data() + t * row);
  }
  const int half = dr / 2;
  std::vector<float> cos(static_cast<std::size_t>(T) * half), sin(cos.size());
  FillCosSin(rope_, positions, cos.data(), sin.data());
  be_->Rope(q.data() + dn, T, nh, qk, dr, cos.data(), sin.data(), cfg_.rope_layout);
  be_->Rope(kv.data() + r, T, 1, row, dr, cos.data(), sin.data(), cfg_.rope_layout);
  for (const MlaChunk& c : refs) {
    for (int i = 0; i < c.n; ++i) {
      std::copy_n(kv.data() + (c.row + i) * row, row, c.kv.TokenRow(c.cache_start + i));
    }
  }
  std::vector<float> o(static_cast<std::size_t>(T) * nh * dv);
  if (absorbed_) {
    Absorbed(l, ex, refs, q, T, o.data());
  } else {
    for (const MlaChunk& c : refs) {
      Naive(l, c, q.data() + c.row * nh * qk, o.data() + c.row * nh * dv);
    }
  }
  be_->MatMul(o.data(), T, l.o_proj, out);
}

// Scores against the cached latent directly: q_latent = W_UK^T q_nope per head, and the
// attention-weighted latent is expanded by W_UV afterwards.
void MlaAttention::Absorbed(const DeepseekV3LayerWeights& l, const MlaAbsorbedWeights& ex,
                            std::span<const MlaChunk> refs, const std::vector<float>& q, int T,
                            float* o) const {
  const int nh = cfg_.num_heads, dn = cfg_.qk_nope_head_dim, dr = cfg_.qk_rope_head_dim;
  const int qk = cfg_.qk_head_dim(), dv = cfg_.v_head_dim, r = cfg_.kv_lora_rank;
  std::vector<float> q_latent(static_cast<std::size_t>(T) * nh * r);
  std::vector<float> q_rope(static_cast<std::size_t>(T) * nh * dr);
  std::vector<float> head_in(static_cast<std::size_t>(T) * std::max(dn, r));
  std::vector<float> head_out(static_cast<std::size_t>(T) * std::max(r, dv));
  for (int hd = 0; hd < nh; ++hd) {
    for (int t = 0; t < T; ++t) {
      const float* qh = q.data() + (static_cast<std::size_t>(t) * nh + hd) * qk;
      std::copy_n(qh, dn, head_in.data() + t * dn);
      std::copy_n(qh + dn, dr, q_rope.data() + (static_cast<std::size_t>(t) * nh + hd) * dr);
    }
    const kernels::WeightView uk_t{ex.uk_t[hd].data(), kernels::DType::kF32, r, dn};
    be_->MatMul(head_in.data(), T, uk_t, head_out.data());
    for (int t = 0; t < T; ++t) {
      std::copy_n(head_out.data() + t * r, r,
                  q_latent.data() + (static_cast<std::size_t>(t) * nh + hd) * r);
    }
  }
  std::vector<float> latent_out(q_latent.size());
  std::vector<kernels::MlaAttentionParams> attention(refs.size());
  for (std::size_t i = 0; i < refs.size(); ++i) {
    const MlaChunk& c = refs[i];
    kernels::MlaAttentionParams& p = attention[i];
    p.q_latent = q_latent.data() + static_cast<std::size_t>(c.row) * nh * r;
    p.q_rope = q_rope.data() + static_cast<std::size_t>(c.row) * nh * dr;
    p.out_latent = latent_out.data() + static_cast<std::size_t>(c.row) * nh * r;
    p.n_tokens = c.n;
    p.start_pos = c.cache_start;
    p.n_heads = nh;
    p.kv_lora_rank = r;
    p.rope_dim = dr;
    p.scale = softmax_scale_;
    p.kv = c.kv;
  }
  be_->MlaAttentionBatch(attention);
  for (int hd = 0; hd < nh; ++hd) {
    for (int t = 0; t < T; ++t) {
      std::copy_n(latent_out.data() + (static_cast<std::size_t>(t) * nh + hd) * r, r,
                  head_in.data() + t * r);
    }
    be_->MatMul(head_in.data(), T, l.kv_b_proj.RowSlice(hd * (dn + dv) + dn, dv), head_out.data());
    for (int t = 0; t < T; ++t) {
      std::copy_n(head_out.data() + t * dv, dv, o + (static_cast<std::size_t>(t) * nh + hd) * dv);
    }
  }
}

// The textbook form: expand every cached latent into per-head K_nope and V with kv_b_proj and
// run plain attention over a temporary one-block cache (V zero-padded to the key width).
void MlaAttention::Naive(const DeepseekV3LayerWeights& l, const MlaChunk& c, const float* q,
                         float* o) const {
  const int nh = cfg_.num_heads, dn = cfg_.qk_nope_head_dim, dr = cfg_.qk_rope_head_dim;
  const int qk = cfg_.qk_head_dim(), dv = cfg_.v_head_dim, r = cfg_.kv_lora_rank;
  const int hd = std::max(qk, dv);
  const int ctx = c.cache_start + c.n;
  std::vector<float> latent(static_cast<std::size_t>(ctx) * r);
  for (int t = 0; t < ctx; ++t) std::copy_n(c.kv.TokenRow(t), r, latent.data() + t * r);
  std::vector<float> kvb(static_cast<std::size_t>(ctx) * nh * (dn + dv));
  be_->MatMul(latent.data(), ctx, l.kv_b_proj, kvb.data());
  const int stride = 2 * nh * hd;
  std::vector<float> tmp(static_cast<std::size_t>(ctx) * stride, 0.0f);
  for (int t = 0; t < ctx; ++t) {
    const float* k_rope = c.kv.TokenRow(t) + r;
    for (int head = 0; head < nh; ++head) {
      const float* src = kvb.data() + (static_cast<std::size_t>(t) * nh + head) * (dn + dv);
      float* k = tmp.data() + static_cast<std::size_t>(t) * stride + head * hd;
      std::copy_n(src, dn, k);
      std::copy_n(k_rope, dr, k + dn);
      std::copy_n(src + dn, dv, k + nh * hd);
    }
  }
  std::vector<float> qp(static_cast<std::size_t>(c.n) * nh * hd, 0.0f), op(qp.size());
  for (int i = 0; i < c.n * nh; ++i) std::copy_n(q + i * qk, qk, qp.data() + i * hd);
  const std::int32_t block = 0;
  kernels::GqaAttentionParams p;
  p.q = qp.data();
  p.out = op.data();
  p.n_tokens = c.n;
  p.start_pos = c.cache_start;
  p.n_heads = nh;
  p.n_kv_heads = nh;
  p.head_dim = hd;
  p.scale = softmax_scale_;
  p.kv.layer_base = tmp.data();
  p.kv.block_stride = static_cast<std::int64_t>(ctx) * stride;
  p.kv.token_stride = stride;
  p.kv.block_size = ctx;
  p.kv.block_table = &block;
  p.kv.num_blocks = 1;
  p.k_offset = 0;
  p.v_offset = nh * hd;
  be_->GqaAttention(p);
  for (int i = 0; i < c.n * nh; ++i) std::copy_n(op.data() + i * hd, dv, o + i * dv);
}

}  // namespace tandem::model::internal
