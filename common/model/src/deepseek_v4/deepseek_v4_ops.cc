#include "deepseek_v4/deepseek_v4_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tandem::model::internal::v4 {
namespace {

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// Unweighted RMSNorm of the flattened streams, then one projection row per mix weight.
std::vector<float> MixLogits(kernels::Backend* be, const HyperParams& p, const float* streams,
                             const kernels::WeightView& fn) {
  const int flat = p.streams * p.hidden;
  std::vector<float> normed(flat), mixes(fn.rows);
  RmsNorm(streams, flat, nullptr, p.norm_eps, normed.data());
  be->MatMul(normed.data(), 1, fn, mixes.data());
  return mixes;
}

}  // namespace

void RmsNorm(const float* x, int n, const kernels::WeightView* weight, float eps, float* out) {
  double ss = 0.0;
  for (int i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float inv = 1.0f / std::sqrt(static_cast<float>(ss / n) + eps);
  for (int i = 0; i < n; ++i) {
    out[i] = x[i] * inv * (weight != nullptr ? weight->At(0, i) : 1.0f);
  }
}

void RopeTail(float* x, int dim, std::span<const float> inv_freq, int position, bool inverse) {
  const int pairs = static_cast<int>(inv_freq.size());
  float* tail = x + dim - 2 * pairs;
  for (int i = 0; i < pairs; ++i) {
    const float angle = static_cast<float>(position) * inv_freq[i];
    const float c = std::cos(angle), s = inverse ? -std::sin(angle) : std::sin(angle);
    const float a = tail[2 * i], b = tail[2 * i + 1];
    tail[2 * i] = a * c - b * s;
    tail[2 * i + 1] = b * c + a * s;
  }
}

HyperMix HyperPre(kernels::Backend* be, const HyperParams& p, const float* streams,
                  const kernels::WeightView& fn, const kernels::WeightView& base,
                  const kernels::WeightView& scale, float* collapsed) {
  const int n = p.streams;
  const std::vector<float> m = MixLogits(be, p, streams, fn);
  HyperMix mix;
  mix.post.resize(n);
  mix.comb.resize(static_cast<std::size_t>(n) * n);
  std::vector<float> pre(n);
  for (int i = 0; i < n; ++i) {
    pre[i] = Sigmoid(m[i] * scale.At(0, 0) + base.At(0, i)) + p.eps;
    mix.post[i] = 2.0f * Sigmoid(m[n + i] * scale.At(0, 1) + base.At(0, n + i));
  }
  float* comb = mix.comb.data();
  for (int i = 0; i < n; ++i) {
    float* row = comb + i * n;
    float mx = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < n; ++j) {
      row[j] = m[2 * n + i * n + j] * scale.At(0, 2) + base.At(0, 2 * n + i * n + j);
      mx = std::max(mx, row[j]);
    }
    float sum = 0.0f;
    for (int j = 0; j < n; ++j) sum += (row[j] = std::exp(row[j] - mx));
    for (int j = 0; j < n; ++j) row[j] = row[j] / sum + p.eps;
  }
  // Divides every row (or column) by its sum + eps: one half of a Sinkhorn-Knopp step.
  auto normalize = [&](bool rows) {
    for (int a = 0; a < n; ++a) {
      auto at = [&](int b) -> float& { return rows ? comb[a * n + b] : comb[b * n + a]; };
      float sum = 0.0f;
      for (int b = 0; b < n; ++b) sum += at(b);
      for (int b = 0; b < n; ++b) at(b) /= sum + p.eps;
    }
  };
  normalize(/*rows=*/false);
  for (int it = 1; it < p.sinkhorn_iters; ++it) {
    normalize(/*rows=*/true);
    normalize(/*rows=*/false);
  }
  for (int d = 0; d < p.hidden; ++d) {
    float acc = 0.0f;
    for (int i = 0; i < n; ++i) acc += pre[i] * streams[i * p.hidden + d];
    collapsed[d] = acc;
  }
  return mix;
}

void HyperPost(const HyperParams& p, const HyperMix& mix, const float* block_out, float* streams) {
  const int n = p.streams, h = p.hidden;
  std::vector<float> next(static_cast<std::size_t>(n) * h);
  for (int j = 0; j < n; ++j) {
    for (int d = 0; d < h; ++d) {
      float acc = mix.post[j] * block_out[d];
      for (int i = 0; i < n; ++i) acc += mix.comb[i * n + j] * streams[i * h + d];
      next[j * h + d] = acc;
    }
  }
  std::copy(next.begin(), next.end(), streams);
}

void HyperHead(kernels::Backend* be, const HyperParams& p, const float* streams,
               const kernels::WeightView& fn, const kernels::WeightView& base,
               const kernels::WeightView& scale, float* out) {
  const std::vector<float> m = MixLogits(be, p, streams, fn);
  std::vector<float> pre(p.streams);
  for (int i = 0; i < p.streams; ++i) {
    pre[i] = Sigmoid(m[i] * scale.At(0, 0) + base.At(0, i)) + p.eps;
  }
  for (int d = 0; d < p.hidden; ++d) {
    float acc = 0.0f;
    for (int i = 0; i < p.streams; ++i) acc += pre[i] * streams[i * p.hidden + d];
    out[d] = acc;
  }
}

void CompressWindow(const WindowRows& previous, const WindowRows& current, bool overlapping,
                    int dim, const kernels::WeightView& ape, const kernels::WeightView& norm,
                    float norm_eps, std::span<const float> inv_freq, int position, float* out) {
  const int rate = static_cast<int>(current.kv.size());
  std::vector<float> logit, value, pooled(dim);
  for (int c = 0; c < dim; ++c) {
    logit.clear();
    value.clear();
    if (overlapping) {
      for (std::size_t j = 0; j < previous.kv.size(); ++j) {
        value.push_back(previous.kv[j][c]);
        logit.push_back(previous.gate[j][c] + ape.At(static_cast<std::int64_t>(j), c));
      }
    }
    const int offset = overlapping ? dim : 0;
    for (int j = 0; j < rate; ++j) {
      value.push_back(current.kv[j][offset + c]);
      logit.push_back(current.gate[j][offset + c] + ape.At(j, offset + c));
    }
    const float mx = *std::max_element(logit.begin(), logit.end());
    float sum = 0.0f;
    for (float& l : logit) sum += (l = std::exp(l - mx));
    float acc = 0.0f;
    for (std::size_t j = 0; j < value.size(); ++j) acc += value[j] * (logit[j] / sum);
    pooled[c] = acc;
  }
  RmsNorm(pooled.data(), dim, &norm, norm_eps, out);
  RopeTail(out, dim, inv_freq, position, /*inverse=*/false);
}

void SwiGluMlp(kernels::Backend* be, const kernels::WeightView& gate, const kernels::WeightView& up,
               const kernels::WeightView& down, float limit, const float* x, float* out,
               std::vector<float>* scratch) {
  const auto inter = static_cast<std::size_t>(gate.rows);
  scratch->resize(2 * inter);
  float* g = scratch->data();
  float* u = g + inter;
  be->MatMul(x, 1, gate, g);
  be->MatMul(x, 1, up, u);
  for (std::size_t i = 0; i < inter; ++i) {
    const float gi = std::min(g[i], limit);
    const float ui = std::clamp(u[i], -limit, limit);
    g[i] = gi / (1.0f + std::exp(-gi)) * ui;
  }
  be->MatMul(g, 1, down, out);
}

}  // namespace tandem::model::internal::v4
