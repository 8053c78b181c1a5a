#include "ops/elementwise.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "simd/simd.h"
#include "simd/simd_math.h"

TANDEM_KERNELS_ISA_BEGIN
namespace {

// Weight element i of a norm vector (one row) in its stored dtype.
struct PlainAt {
  const WeightView& w;
  float operator()(std::int64_t i) const {
    return w.dtype == DType::kF32 ? static_cast<const float*>(w.data)[i]
                                  : ToF32(static_cast<const std::uint16_t*>(w.data)[i]);
  }
};
// F16, FP8: widened once per call into `wide` (exact), not once per row: a 512-token prefill
// converted each element 512 times, one by one (1.7% of an f16 model's prefill).
struct WidenedAt {
  std::vector<float> wide;
  WidenedAt(const WeightView& w, std::int64_t dim) : wide(dim) {
    for (std::int64_t i = 0; i < dim; ++i) wide[i] = w.At(0, i);
  }
  float operator()(std::int64_t i) const { return wide[i]; }
};

template <typename At>
void RmsNormTyped(const float* x, std::int64_t rows, std::int64_t dim, const At& w, float eps,
                  float* y) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const float inv = 1.0f / std::sqrt(Dot(xr, xr, dim) / static_cast<float>(dim) + eps);
    for (std::int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * inv * w(i);
  }
}

template <RopeLayout kLayout>
void RopeTyped(float* x, std::int64_t rows, int n_heads, int head_stride, int rope_dim,
               const float* cos, const float* sin) {
  const int half = rope_dim / 2;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* c = cos + r * half;
    const float* s = sin + r * half;
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + (r * n_heads + h) * head_stride;
      for (int i = 0; i < half; ++i) {
        const int a = kLayout == RopeLayout::kInterleaved ? 2 * i : i;
        const int b = kLayout == RopeLayout::kInterleaved ? 2 * i + 1 : i + half;
        const float x0 = v[a];
        const float x1 = v[b];
        v[a] = x0 * c[i] - x1 * s[i];
        v[b] = x0 * s[i] + x1 * c[i];
      }
    }
  }
}

}  // namespace

void RmsNorm(const float* x, std::int64_t rows, std::int64_t dim, const WeightView& weight,
             float eps, float* y) {
  if (weight.dtype == DType::kF32 || weight.dtype == DType::kBF16) {
    RmsNormTyped(x, rows, dim, PlainAt{weight}, eps, y);
  } else {
    RmsNormTyped(x, rows, dim, WidenedAt(weight, dim), eps, y);
  }
}

void SiluMul(const float* gate, const float* up, std::int64_t n, float* out) {
  // Chunk or tail, an element gets the same operations (ExpScalar is ExpV's lane), so where a row
  // starts in the flat [rows][hidden] array does not change its values.
  std::int64_t i = 0;
  const V16f one = SplatV(1.0f);
  for (; i + 16 <= n; i += 16) {
    const V16f g = LoadV(gate + i);
    StoreV(out + i, g / (one + ExpV(-g)) * LoadV(up + i));
  }
  for (; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + ExpScalar(-g)) * up[i];
  }
}

void Axpy(float alpha, const float* x, std::int64_t n, float* y) {
  for (std::int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void Rope(float* x, std::int64_t rows, int n_heads, int head_stride, int rope_dim, const float* cos,
          const float* sin, RopeLayout layout) {
  if (layout == RopeLayout::kInterleaved) {
    RopeTyped<RopeLayout::kInterleaved>(x, rows, n_heads, head_stride, rope_dim, cos, sin);
  } else {
    RopeTyped<RopeLayout::kHalfSplit>(x, rows, n_heads, head_stride, rope_dim, cos, sin);
  }
}

void Embed(const WeightView& table, const std::int32_t* ids, std::int64_t rows, float* out) {
  const std::int64_t dim = table.cols;
  for (std::int64_t r = 0; r < rows; ++r) {
    float* o = out + r * dim;
    if (table.dtype == DType::kF32) {
      std::memcpy(o, static_cast<const float*>(table.data) + ids[r] * dim, dim * sizeof(float));
    } else if (table.dtype == DType::kBF16) {
      const auto* src = static_cast<const std::uint16_t*>(table.data) + ids[r] * dim;
      for (std::int64_t i = 0; i < dim; ++i) o[i] = ToF32(src[i]);
    } else {
      for (std::int64_t i = 0; i < dim; ++i) o[i] = table.At(ids[r], i);
    }
  }
}

TANDEM_KERNELS_ISA_END
