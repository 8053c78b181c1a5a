#include "rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace tandem::model::internal {
namespace {

// YaRN's magnitude correction for a context extended `scale` times (transformers' get_mscale).
double YarnMscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// Dimension index at which a frequency completes `rotations` turns over the original context.
double YarnCorrectionDim(double rotations, int dim, double base, int original_max) {
  return dim * std::log(original_max / (rotations * 2.0 * std::numbers::pi)) /
         (2.0 * std::log(base));
}

void ApplyYarn(int rope_dim, double theta, const RopeScaling& s, RopeTables* t) {
  const double factor = s.factor;
  const double low = std::max(std::floor(YarnCorrectionDim(s.beta_fast, rope_dim, theta,
                                                           s.original_max_position_embeddings)),
                              0.0);
  double high = std::min(std::ceil(YarnCorrectionDim(s.beta_slow, rope_dim, theta,
                                                     s.original_max_position_embeddings)),
                         static_cast<double>(rope_dim - 1));
  if (low == high) high += 0.001;  // the ramp would divide by zero
  for (int i = 0; i < rope_dim / 2; ++i) {
    const double extrapolated = t->inv_freq[i];
    const double interpolated = extrapolated / factor;
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double keep = 1.0 - ramp;  // share of the original (extrapolated) frequency
    t->inv_freq[i] = static_cast<float>(interpolated * (1.0 - keep) + extrapolated * keep);
  }
  // mscale == 0 stands for "absent": the config then gets the plain YaRN factor.
  t->cos_sin_scale =
      static_cast<float>(s.mscale != 0.0f && s.mscale_all_dim != 0.0f
                             ? YarnMscale(factor, s.mscale) / YarnMscale(factor, s.mscale_all_dim)
                             : YarnMscale(factor, 1.0));
  // DeepSeek scales the softmax by mscale(factor, mscale_all_dim)^2 on top of 1/sqrt(head_dim).
  if (s.mscale_all_dim != 0.0f) {
    const double m = YarnMscale(factor, s.mscale_all_dim);
    t->softmax_scale_factor = static_cast<float>(m * m);
  }
}

void ApplyLlama3(const RopeScaling& s, RopeTables* t) {
  const double low_freq_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
  const double high_freq_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
  for (float& f : t->inv_freq) {
    const double wavelen = 2.0 * std::numbers::pi / f;
    if (wavelen < high_freq_wavelen) continue;  // high frequencies stay as trained
    if (wavelen > low_freq_wavelen) {
      f = static_cast<float>(f / s.factor);
      continue;
    }
    const double smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                          (s.high_freq_factor - s.low_freq_factor);
    f = static_cast<float>((1.0 - smooth) * f / s.factor + smooth * f);
  }
}

}  // namespace

RopeTables ComputeRopeTables(int rope_dim, float theta, const RopeScaling& scaling) {
  RopeTables t;
  t.rope_dim = rope_dim;
  t.inv_freq.resize(rope_dim / 2);
  for (int i = 0; i < rope_dim / 2; ++i) {
    // The exponent is rounded to float first, as transformers computes it.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(rope_dim);
    t.inv_freq[i] = static_cast<float>(1.0 / std::pow(static_cast<double>(theta), exponent));
  }
  switch (scaling.type) {
    case RopeScalingType::kNone:
    case RopeScalingType::kDynamic:  // rejected by the config parsers; same as none at short range
      break;
    case RopeScalingType::kLinear:
      for (float& f : t.inv_freq) f /= scaling.factor;
      break;
    case RopeScalingType::kLlama3:
      ApplyLlama3(scaling, &t);
      break;
    case RopeScalingType::kYarn:
      ApplyYarn(rope_dim, theta, scaling, &t);
      break;
  }
  return t;
}

void FillCosSin(const RopeTables& tables, std::span<const int> positions, float* cos, float* sin) {
  const int half = tables.rope_dim / 2;
  for (std::size_t p = 0; p < positions.size(); ++p) {
    for (int i = 0; i < half; ++i) {
      const float angle = static_cast<float>(positions[p]) * tables.inv_freq[i];
      cos[p * half + i] = std::cos(angle) * tables.cos_sin_scale;
      sin[p * half + i] = std::sin(angle) * tables.cos_sin_scale;
    }
  }
}

}  // namespace tandem::model::internal
