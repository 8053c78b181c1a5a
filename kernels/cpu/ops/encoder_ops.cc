#include "ops/encoder_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "matmul/matmul.h"
#include "simd/simd.h"
#include "simd/simd_math.h"

TANDEM_KERNELS_ISA_BEGIN

void LayerNorm(const float* x, std::int64_t rows, std::int64_t dim, const WeightView& weight,
               const WeightView& bias, float eps, float* y) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    // Two passes in double: the mean and variance do not lose the small differences of rows whose
    // mean is large against their spread (a residual stream), which float sums would.
    double sum = 0.0;
    for (std::int64_t i = 0; i < dim; ++i) sum += xr[i];
    const double mean = sum / static_cast<double>(dim);
    double ss = 0.0;
    for (std::int64_t i = 0; i < dim; ++i) {
      const double d = xr[i] - mean;
      ss += d * d;
    }
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + eps));
    const float m = static_cast<float>(mean);
    float* yr = y + r * dim;
    for (std::int64_t i = 0; i < dim; ++i) {
      const float b = bias.empty() ? 0.0f : bias.At(0, i);
      yr[i] = (xr[i] - m) * inv * weight.At(0, i) + b;
    }
  }
}

void Gelu(const float* x, std::int64_t n, GeluForm form, float* out) {
  if (form == GeluForm::kErf) {
    for (std::int64_t i = 0; i < n; ++i) {
      out[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
    }
    return;
  }
  constexpr float kSqrt2OverPi = 0.79788456080286536f;
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    out[i] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
  }
}

void AddBias(float* y, std::int64_t rows, const WeightView& bias) {
  const std::int64_t dim = bias.cols;
  std::vector<float> b(static_cast<std::size_t>(dim));
  for (std::int64_t i = 0; i < dim; ++i) b[i] = bias.At(0, i);
  for (std::int64_t r = 0; r < rows; ++r) {
    float* yr = y + r * dim;
    for (std::int64_t i = 0; i < dim; ++i) yr[i] += b[i];
  }
}

void FullAttentionReference(const FullAttentionParams& p) {
  std::vector<float> scores(static_cast<std::size_t>(p.n_tokens));
  for (int h = 0; h < p.n_heads; ++h) {
    for (int i = 0; i < p.n_tokens; ++i) {
      const float* q = p.q + i * p.q_stride + h * p.head_dim;
      float mx = -INFINITY;
      for (int t = 0; t < p.n_tokens; ++t) {
        const float* k = p.k + t * p.kv_stride + h * p.head_dim;
        float dot = 0.0f;
        for (int d = 0; d < p.head_dim; ++d) dot += q[d] * k[d];
        scores[t] = dot * p.scale;
        mx = std::max(mx, scores[t]);
      }
      float sum = 0.0f;
      for (float& s : scores) {
        s = std::exp(s - mx);
        sum += s;
      }
      float* out = p.out + i * p.out_stride + h * p.head_dim;
      for (int d = 0; d < p.head_dim; ++d) {
        float acc = 0.0f;
        for (int t = 0; t < p.n_tokens; ++t)
          acc += scores[t] * p.v[t * p.kv_stride + h * p.head_dim + d];
        out[d] = acc / sum;
      }
    }
  }
}

namespace {

// Queries per GEMM pass: bounds the score block at kQueryChunk x n_tokens floats, so a long
// sequence (a 2048-pixel image has ~21,000 patches) needs no n^2 buffer.
constexpr int kQueryChunk = 256;
// Keys per score task: a task's slice of K^T (head_dim x kKeyBlock floats) stays in L2.
constexpr int kKeyBlock = 512;

// s[r][j] for R query rows and keys [j, j + 32), as outer products over the head dimension: each
// step broadcasts one query element and multiplies it into two key vectors, so no horizontal sums
// (a dot-product tile spends as much on those as on the FMAs when head_dim is under ~100).
// kFull: all 32 keys present (the common case, without the masked loads of the last tile).
template <int R, bool kFull>
inline void ScoreTile(const float* q, int hd, const float* kt, std::int64_t n, std::int64_t j,
                      int width, float* s) {
  F32x16 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = Zero();
  const int w0 = kFull ? kLanes : std::min(width, kLanes), w1 = kFull ? kLanes : width - w0;
  for (int d = 0; d < hd; ++d) {
    const float* row = kt + d * n + j;
    F32x16 k0, k1;
    if constexpr (kFull) {
      k0 = Load(row);
      k1 = Load(row + kLanes);
    } else {
      k0 = LoadPartial(row, w0);
      k1 = w1 > 0 ? LoadPartial(row + kLanes, w1) : Zero();
    }
    for (int r = 0; r < R; ++r) {
      const F32x16 qv = Splat(q[r * hd + d]);
      acc[r][0] = Fma(qv, k0, acc[r][0]);
      acc[r][1] = Fma(qv, k1, acc[r][1]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float* out = s + r * n + j;
    if constexpr (kFull) {
      Store(out, acc[r][0]);
      Store(out + kLanes, acc[r][1]);
    } else {
      StorePartial(out, acc[r][0], w0);
      if (w1 > 0) StorePartial(out + kLanes, acc[r][1], w1);
    }
  }
}

template <int R>
inline void ScoreTiles(const float* q, int hd, const float* kt, std::int64_t n,
                       std::int64_t j_begin, std::int64_t j_end, float* s) {
  std::int64_t j = j_begin;
  for (; j + 2 * kLanes <= j_end; j += 2 * kLanes) ScoreTile<R, true>(q, hd, kt, n, j, 0, s);
  if (j < j_end) ScoreTile<R, false>(q, hd, kt, n, j, static_cast<int>(j_end - j), s);
}

// s = q . k^T for `rows` queries ([rows][hd]) against all n keys held transposed (kt: [hd][n]).
void Scores(ThreadPool& pool, const float* q, int rows, int hd, const float* kt, std::int64_t n,
            float* s) {
  const int blocks = static_cast<int>((n + kKeyBlock - 1) / kKeyBlock);
  pool.Run(blocks, [&](int b, int) {
    const std::int64_t j_end = std::min<std::int64_t>(n, (b + 1) * std::int64_t{kKeyBlock});
    const std::int64_t j_begin = b * std::int64_t{kKeyBlock};
    for (int i = 0; i < rows; i += 4) {
      const float* qi = q + static_cast<std::int64_t>(i) * hd;
      float* si = s + static_cast<std::int64_t>(i) * n;
      switch (std::min(4, rows - i)) {
        case 4:
          ScoreTiles<4>(qi, hd, kt, n, j_begin, j_end, si);
          break;
        case 3:
          ScoreTiles<3>(qi, hd, kt, n, j_begin, j_end, si);
          break;
        case 2:
          ScoreTiles<2>(qi, hd, kt, n, j_begin, j_end, si);
          break;
        default:
          ScoreTiles<1>(qi, hd, kt, n, j_begin, j_end, si);
          break;
      }
    }
  });
}

}  // namespace

void FullAttention(ThreadPool& pool, const FullAttentionParams& p) {
  const int n = p.n_tokens, hd = p.head_dim;
  if (n <= 0 || p.n_heads <= 0 || hd <= 0) return;
  const int chunk = std::min(n, kQueryChunk);
  std::vector<float> kt(static_cast<std::size_t>(hd) * n), vt(static_cast<std::size_t>(hd) * n);
  std::vector<float> q(static_cast<std::size_t>(chunk) * hd),
      o(static_cast<std::size_t>(chunk) * hd);
  std::vector<float> s(static_cast<std::size_t>(chunk) * n), inv_sum(chunk);
  for (int h = 0; h < p.n_heads; ++h) {
    // K and V transposed: K^T for the outer-product scores, V^T so that P.V is the GEMM x * w^T.
    for (int t = 0; t < n; ++t) {
      const float* kr = p.k + t * p.kv_stride + h * hd;
      const float* vr = p.v + t * p.kv_stride + h * hd;
      for (int d = 0; d < hd; ++d) {
        kt[static_cast<std::size_t>(d) * n + t] = kr[d];
        vt[static_cast<std::size_t>(d) * n + t] = vr[d];
      }
    }
    const WeightView vw{vt.data(), DType::kF32, hd, n, {}};
    for (int c0 = 0; c0 < n; c0 += chunk) {
      const int rows = std::min(chunk, n - c0);
      for (int i = 0; i < rows; ++i) {
        const float* qr = p.q + (c0 + i) * p.q_stride + h * hd;
        float* dst = q.data() + static_cast<std::size_t>(i) * hd;
        for (int d = 0; d < hd; ++d) dst[d] = qr[d] * p.scale;
      }
      Scores(pool, q.data(), rows, hd, kt.data(), n, s.data());
      pool.Run(rows, [&](int i, int) {
        inv_sum[i] = 1.0f / ExpAndSum(s.data() + static_cast<std::size_t>(i) * n, n);
      });
      MatMul(pool, s.data(), rows, vw, o.data());
      for (int i = 0; i < rows; ++i) {
        float* out = p.out + (c0 + i) * p.out_stride + h * hd;
        const float* src = o.data() + static_cast<std::size_t>(i) * hd;
        for (int d = 0; d < hd; ++d) out[d] = src[d] * inv_sum[i];
      }
    }
  }
}

TANDEM_KERNELS_ISA_END
