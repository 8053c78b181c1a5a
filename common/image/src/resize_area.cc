// OpenCV's INTER_AREA downscale for 8-bit RGB, which recipe 0.2.0 uses to bring a low-detail
// image's long side down to its limit: an exact 2x2 reduction averages with (sum + 2) >> 2, other
// integer factors with round(sum * (1 / area)), and any other factor weighs each source pixel by
// the part of it a destination cell covers, accumulating in float as OpenCV does.
#include <cmath>
#include <cfloat>

#include "decode.h"

namespace tandem::image::internal {
namespace {

struct AreaTap {
  int dst;    // destination index (pixels)
  int src;    // source index (pixels)
  float weight;
};

// OpenCV's computeResizeAreaTab.
std::vector<AreaTap> AreaTaps(int src_size, int dst_size, double scale) {
  std::vector<AreaTap> taps;
  taps.reserve(static_cast<std::size_t>(src_size) * 2);
  for (int d = 0; d < dst_size; ++d) {
    const double f1 = d * scale;
    const double f2 = f1 + scale;
    const double cell = std::min(scale, src_size - f1);
    int s1 = static_cast<int>(std::ceil(f1));
    int s2 = static_cast<int>(std::floor(f2));
    s2 = std::min(s2, src_size - 1);
    s1 = std::min(s1, s2);
    if (s1 - f1 > 1e-3) taps.push_back({d, s1 - 1, static_cast<float>((s1 - f1) / cell)});
    for (int s = s1; s < s2; ++s) taps.push_back({d, s, static_cast<float>(1.0 / cell)});
    if (f2 - s2 > 1e-3) {
      taps.push_back({d, s2, static_cast<float>(std::min(std::min(f2 - s2, 1.0), cell) / cell)});
    }
  }
  return taps;
}

std::uint8_t RoundToByte(float v) {
  const int r = static_cast<int>(std::nearbyint(v));
  return static_cast<std::uint8_t>(r < 0 ? 0 : (r > 255 ? 255 : r));
}

Bitmap AreaFast(const Bitmap& src, int width, int height, int sx, int sy) {
  Bitmap out{width, height, 3, std::vector<std::uint8_t>(static_cast<std::size_t>(width) * height * 3)};
  const std::size_t stride = static_cast<std::size_t>(src.width) * 3;
  const float scale = 1.f / static_cast<float>(sx * sy);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) {
        int sum = 0;
        for (int j = 0; j < sy; ++j) {
          const std::uint8_t* row = src.pixels.data() + static_cast<std::size_t>(y * sy + j) * stride;
          for (int i = 0; i < sx; ++i) sum += row[static_cast<std::size_t>(x * sx + i) * 3 + c];
        }
        out.pixels[(static_cast<std::size_t>(y) * width + x) * 3 + c] =
            sx == 2 && sy == 2 ? static_cast<std::uint8_t>((sum + 2) >> 2)
                               : RoundToByte(static_cast<float>(sum) * scale);
      }
    }
  }
  return out;
}

}  // namespace

Bitmap ResizeArea(const Bitmap& src, int width, int height) {
  if (src.width == width && src.height == height) return src;
  const double scale_x = 1.0 / (static_cast<double>(width) / src.width);
  const double scale_y = 1.0 / (static_cast<double>(height) / src.height);
  const int iscale_x = static_cast<int>(std::nearbyint(scale_x));
  const int iscale_y = static_cast<int>(std::nearbyint(scale_y));
  if (std::abs(scale_x - iscale_x) < DBL_EPSILON && std::abs(scale_y - iscale_y) < DBL_EPSILON) {
    return AreaFast(src, width, height, iscale_x, iscale_y);
  }
  const std::vector<AreaTap> xt = AreaTaps(src.width, width, scale_x);
  const std::vector<AreaTap> yt = AreaTaps(src.height, height, scale_y);
  Bitmap out{width, height, 3, std::vector<std::uint8_t>(static_cast<std::size_t>(width) * height * 3)};
  const std::size_t n = static_cast<std::size_t>(width) * 3;
  std::vector<float> buf(n);
  std::vector<float> sum(n, 0.f);
  const std::size_t stride = static_cast<std::size_t>(src.width) * 3;
  int prev = yt.empty() ? 0 : yt.front().dst;
  auto flush = [&](int row) {
    std::uint8_t* d = out.pixels.data() + static_cast<std::size_t>(row) * n;
    for (std::size_t i = 0; i < n; ++i) d[i] = RoundToByte(sum[i]);
  };
  for (const AreaTap& ty : yt) {
    const std::uint8_t* s = src.pixels.data() + static_cast<std::size_t>(ty.src) * stride;
    std::fill(buf.begin(), buf.end(), 0.f);
    for (const AreaTap& tx : xt) {
      const std::size_t di = static_cast<std::size_t>(tx.dst) * 3;
      const std::size_t si = static_cast<std::size_t>(tx.src) * 3;
      for (int c = 0; c < 3; ++c) buf[di + c] = buf[di + c] + s[si + c] * tx.weight;
    }
    if (ty.dst != prev) {
      flush(prev);
      for (std::size_t i = 0; i < n; ++i) sum[i] = ty.weight * buf[i];
      prev = ty.dst;
    } else {
      for (std::size_t i = 0; i < n; ++i) sum[i] += ty.weight * buf[i];
    }
  }
  flush(prev);
  return out;
}

}  // namespace tandem::image::internal
