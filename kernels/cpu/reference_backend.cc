// Straightforward CPU backend: the reference semantics of every op, written for clarity. The fast
// CPU backend and every other backend are tested against it.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernel_table.h"
#include "tandem/kernels/backend.h"

namespace tandem::kernels {
namespace {

float Dot(const float* x, const WeightView& w, std::int64_t row) {
  const std::int64_t n = w.cols;
  float acc = 0.0f;
  if (w.dtype == DType::kF32 && w.layout == WeightLayout::kRows) {
    const float* wr = static_cast<const float*>(w.data) + row * n;
    for (std::int64_t i = 0; i < n; ++i) acc += x[i] * wr[i];
  } else {
    for (std::int64_t i = 0; i < n; ++i) acc += x[i] * w.At(row, i);
  }
  return acc;
}

// scores[t] <- exp(scores[t] - max); returns their sum.
float ExpAndSum(std::vector<float>& scores) {
  float mx = -INFINITY;
  for (float s : scores) mx = std::max(mx, s);
  float sum = 0.0f;
  for (float& s : scores) {
    s = std::exp(s - mx);
    sum += s;
  }
  return sum;
}

class ReferenceCpuBackend final : public Backend {
 public:
  ReferenceCpuBackend() = default;

  std::string_view name() const override { return "cpu-reference"; }

  float* AllocateFloats(std::size_t count) override { return new float[count](); }
  void Free(float* ptr) override { delete[] ptr; }

  void MatMul(const float* x, std::int64_t rows, const WeightView& w, float* y) override {
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t o = 0; o < w.rows; ++o) y[r * w.rows + o] = Dot(x + r * w.cols, w, o);
    }
  }

  void RmsNorm(const float* x, std::int64_t rows, std::int64_t dim, const WeightView& weight,
               float eps, float* y) override {
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * dim;
      float ss = 0.0f;
      for (std::int64_t i = 0; i < dim; ++i) ss += xr[i] * xr[i];
      const float inv = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
      for (std::int64_t i = 0; i < dim; ++i) y[r * dim + i] = xr[i] * inv * weight.At(0, i);
    }
  }

  void SiluMul(const float* gate, const float* up, std::int64_t rows, std::int64_t hidden,
               float* out) override {
    for (std::int64_t i = 0; i < rows * hidden; ++i) {
      const float g = gate[i];
      out[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
  }

  void Axpy(float alpha, const float* x, std::int64_t n, float* y) override {
    for (std::int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
  }

  void Rope(float* x, std::int64_t rows, int n_heads, int head_stride, int rope_dim,
            const float* cos, const float* sin, RopeLayout layout) override {
    const int half = rope_dim / 2;
    for (std::int64_t r = 0; r < rows; ++r) {
      for (int h = 0; h < n_heads; ++h) {
        float* v = x + (r * n_heads + h) * head_stride;
        for (int i = 0; i < half; ++i) {
          const float c = cos[r * half + i];
          const float s = sin[r * half + i];
          const int a = layout == RopeLayout::kInterleaved ? 2 * i : i;
          const int b = layout == RopeLayout::kInterleaved ? 2 * i + 1 : i + half;
          const float x0 = v[a];
          const float x1 = v[b];
          v[a] = x0 * c - x1 * s;
          v[b] = x0 * s + x1 * c;
        }
      }
    }
  }

  void Embed(const WeightView& table, const std::int32_t* ids, std::int64_t rows,
             float* out) override {
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t i = 0; i < table.cols; ++i) out[r * table.cols + i] = table.At(ids[r], i);
    }
  }

  void GqaAttention(const GqaAttentionParams& p) override {
    const int group = p.n_heads / p.n_kv_heads;
    std::vector<float> scores;
    for (int i = 0; i < p.n_tokens; ++i) {
      const int ctx = p.start_pos + i + 1;
      scores.resize(ctx);
      for (int h = 0; h < p.n_heads; ++h) {
        const int kvh = h / group;
        const float* q = p.q + (static_cast<std::int64_t>(i) * p.n_heads + h) * p.head_dim;
        for (int t = 0; t < ctx; ++t) {
          const float* k = p.kv.TokenRow(t) + p.k_offset + kvh * p.head_dim;
          float s = 0.0f;
          for (int d = 0; d < p.head_dim; ++d) s += q[d] * k[d];
          scores[t] = s * p.scale;
        }
        const float sum = ExpAndSum(scores);
        float* o = p.out + (static_cast<std::int64_t>(i) * p.n_heads + h) * p.head_dim;
        std::fill(o, o + p.head_dim, 0.0f);
        for (int t = 0; t < ctx; ++t) {
          const float* v = p.kv.TokenRow(t) + p.v_offset + kvh * p.head_dim;
          const float a = scores[t] / sum;
          for (int d = 0; d < p.head_dim; ++d) o[d] += a * v[d];
        }
      }
    }
  }

  void LayerNorm(const float* x, std::int64_t rows, std::int64_t dim, const WeightView& weight,
                 const WeightView& bias, float eps, float* y) override {
    cpu::kGenericKernels.layer_norm(x, rows, dim, weight, bias, eps, y);
  }
  void Gelu(const float* x, std::int64_t n, GeluForm form, float* out) override {
    cpu::kGenericKernels.gelu(x, n, form, out);
  }
  void AddBias(float* y, std::int64_t rows, const WeightView& bias) override {
    cpu::kGenericKernels.add_bias(y, rows, bias);
  }
  void FullAttention(const FullAttentionParams& p) override {
    cpu::kGenericKernels.full_attention_reference(p);
  }

  void MlaAttention(const MlaAttentionParams& p) override {
    std::vector<float> scores;
    for (int i = 0; i < p.n_tokens; ++i) {
      const int ctx = p.start_pos + i + 1;
      scores.resize(ctx);
      for (int h = 0; h < p.n_heads; ++h) {
        const std::int64_t qh = static_cast<std::int64_t>(i) * p.n_heads + h;
        const float* ql = p.q_latent + qh * p.kv_lora_rank;
        const float* qr = p.q_rope + qh * p.rope_dim;
        for (int t = 0; t < ctx; ++t) {
          const float* c = p.kv.TokenRow(t);
          const float* kr = c + p.kv_lora_rank;
          float s = 0.0f;
          for (int d = 0; d < p.kv_lora_rank; ++d) s += ql[d] * c[d];
          for (int d = 0; d < p.rope_dim; ++d) s += qr[d] * kr[d];
          scores[t] = s * p.scale;
        }
        const float sum = ExpAndSum(scores);
        float* o = p.out_latent + qh * p.kv_lora_rank;
        std::fill(o, o + p.kv_lora_rank, 0.0f);
        for (int t = 0; t < ctx; ++t) {
          const float* c = p.kv.TokenRow(t);
          const float a = scores[t] / sum;
          for (int d = 0; d < p.kv_lora_rank; ++d) o[d] += a * c[d];
        }
      }
    }
  }

};

}  // namespace

std::unique_ptr<Backend> CreateReferenceCpuBackend() {
  return std::make_unique<ReferenceCpuBackend>();
}

}  // namespace tandem::kernels
