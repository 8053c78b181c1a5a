#pragma once

// Host-side float math of the DeepSeek-V4 forward for the parts with no Backend op
// (hyper-connections, window compression, clamped SwiGLU); projections go through the Backend.
#include <span>
#include <vector>

#include "tandem/kernels/backend.h"
#include "tandem/kernels/dtype.h"

namespace tandem::model::internal::v4 {

// x * rsqrt(mean(x^2) + eps) (* weight when given), transformers' RMSNorm.
void RmsNorm(const float* x, int n, const kernels::WeightView* weight, float eps, float* out);

// V4 rope: interleaved pairs on the last 2*inv_freq.size() channels of a `dim`-wide vector.
// `inverse` rotates by -angle (V4 rotates the attention output back to the query position).
void RopeTail(float* x, int dim, std::span<const float> inv_freq, int position, bool inverse);

// One hyper-connection's mixing weights for one token: `pre` collapses the streams into the
// block input, `post` spreads the block output, `comb` (Sinkhorn-normalised) mixes the streams.
struct HyperMix {
  std::vector<float> post;  // [n]
  std::vector<float> comb;  // [n][n]
};

struct HyperParams {
  int streams = 1;
  int hidden = 0;
  int sinkhorn_iters = 1;
  float eps = 1e-6f;
  float norm_eps = 1e-6f;
};

// streams: [n][hidden]. Writes the collapsed block input to `collapsed` ([hidden]).
HyperMix HyperPre(kernels::Backend* be, const HyperParams& p, const float* streams,
                  const kernels::WeightView& fn, const kernels::WeightView& base,
                  const kernels::WeightView& scale, float* collapsed);
// streams <- post * block_out + comb^T streams.
void HyperPost(const HyperParams& p, const HyperMix& mix, const float* block_out, float* streams);
// The final collapse before the model norm (pre weights only).
void HyperHead(kernels::Backend* be, const HyperParams& p, const float* streams,
               const kernels::WeightView& fn, const kernels::WeightView& base,
               const kernels::WeightView& scale, float* out);

// The raw compressor projections of one window's source tokens (pointers into cache rows).
struct WindowRows {
  std::vector<const float*> kv;    // per source token, the compressor kv projection
  std::vector<const float*> gate;  // per source token, the compressor gate projection
};

// Softmax-gated pooling of one window. Overlapping (CSA): `previous` (may be empty: first window)
// contributes its first `dim` channels, `current` its last `dim` channels, over 2*rate slots;
// otherwise `current` alone over rate slots. ape: [rate][width] gate bias. Then RMSNorm with
// `norm` and rope at `position` on the tail.
void CompressWindow(const WindowRows& previous, const WindowRows& current, bool overlapping,
                    int dim, const kernels::WeightView& ape, const kernels::WeightView& norm,
                    float norm_eps, std::span<const float> inv_freq, int position, float* out);

// x -> down(silu(min(gate x, limit)) * clamp(up x, -limit, limit)); scratch grows as needed.
void SwiGluMlp(kernels::Backend* be, const kernels::WeightView& gate, const kernels::WeightView& up,
               const kernels::WeightView& down, float limit, const float* x, float* out,
               std::vector<float>* scratch);

}  // namespace tandem::model::internal::v4
