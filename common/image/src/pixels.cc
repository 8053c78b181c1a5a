// Pixel operations of recipe's pipeline, with OpenCV's integer arithmetic so that the output
// matches recipe's to the level, not just visually.
#include <webp/decode.h>
#include <webp/encode.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "decode.h"
#include "tandem/image/errors.h"

namespace tandem::image::internal {
namespace {

constexpr int kBackground = 0xfd;  // recipe's INFERENCE_BACKGROUND, #FDFDFD
constexpr std::uint8_t kPadGrey = 127;
constexpr int kCoefBits = 11;  // OpenCV's INTER_RESIZE_COEF_BITS
constexpr int kCoefScale = 1 << kCoefBits;

// OpenCV's interpolateCubic (Keys, A = -0.75), in float as OpenCV computes it.
std::array<float, 4> CubicWeights(float x) {
  constexpr float A = -0.75f;
  std::array<float, 4> c;
  c[0] = ((A * (x + 1) - 5 * A) * (x + 1) + 8 * A) * (x + 1) - 4 * A;
  c[1] = ((A + 2) * x - (A + 3)) * x * x + 1;
  c[2] = ((A + 2) * (1 - x) - (A + 3)) * (1 - x) * (1 - x) + 1;
  c[3] = 1.f - c[0] - c[1] - c[2];
  return c;
}

struct Tap {
  int first;                      // source index of the first of four taps (may be < 0)
  std::array<int, 4> weight;      // fixed point, sum ~ 2048
};

std::vector<Tap> Taps(int src_size, int dst_size) {
  const double scale = 1.0 / (static_cast<double>(dst_size) / src_size);
  std::vector<Tap> taps(static_cast<std::size_t>(dst_size));
  for (int d = 0; d < dst_size; ++d) {
    float f = static_cast<float>((d + 0.5) * scale - 0.5);
    const int s = static_cast<int>(std::floor(f));
    f -= static_cast<float>(s);
    const std::array<float, 4> w = CubicWeights(f);
    Tap& t = taps[static_cast<std::size_t>(d)];
    t.first = s - 1;
    for (int k = 0; k < 4; ++k) {
      // saturate_cast<short>: round half to even.
      t.weight[k] = static_cast<int>(std::nearbyint(w[k] * kCoefScale));
    }
  }
  return taps;
}

int Clamp(int v, int lo, int hi) { return std::min(std::max(v, lo), hi); }

// One source row resized horizontally into `out` (dst_w * 3 ints, scaled by 2048).
void HorizontalPass(const std::uint8_t* row, int src_w, const std::vector<Tap>& taps,
                    std::vector<int>& out) {
  const int dst_w = static_cast<int>(taps.size());
  for (int dx = 0; dx < dst_w; ++dx) {
    const Tap& t = taps[static_cast<std::size_t>(dx)];
    int idx[4];
    for (int k = 0; k < 4; ++k) idx[k] = Clamp(t.first + k, 0, src_w - 1) * 3;
    for (int c = 0; c < 3; ++c) {
      out[static_cast<std::size_t>(dx) * 3 + c] =
          row[idx[0] + c] * t.weight[0] + row[idx[1] + c] * t.weight[1] +
          row[idx[2] + c] * t.weight[2] + row[idx[3] + c] * t.weight[3];
    }
  }
}

// OpenCV's vertical cubic pass for 8-bit output: its SIMD loop (VResizeCubicVec_32s8u) weighs the
// four rows in float, a * b + c unfused, rounding half to even, over whole vectors of kLanes
// values; the remainder of each row takes the scalar fixed-point path. The split matters: the two
// differ by one level on some pixels. kLanes is 8 (128-bit vectors of int16), the build recipe's
// OpenCV uses; -ffp-contract=off keeps the compiler from fusing what OpenCV does not.
constexpr std::size_t kLanes = 8;

void VerticalPass(const std::vector<int>* const rows[4], const std::array<int, 4>& weight,
                  std::size_t n, std::uint8_t* d) {
  const float scale = 1.f / (kCoefScale * kCoefScale);
  const float b0 = weight[0] * scale;
  const float b1 = weight[1] * scale;
  const float b2 = weight[2] * scale;
  const float b3 = weight[3] * scale;
  const int* s0 = rows[0]->data();
  const int* s1 = rows[1]->data();
  const int* s2 = rows[2]->data();
  const int* s3 = rows[3]->data();
  // OpenCV's rows are BGR: its value p*3 + k is our value p*3 + (2 - k), so which path a value
  // takes depends on its place in the BGR row, not ours.
  const std::size_t vector_end = n / kLanes * kLanes;
  constexpr int kShift = 2 * kCoefBits;
  auto by_float = [&](std::size_t i) {
    float acc = static_cast<float>(s3[i]) * b3;
    acc = static_cast<float>(s2[i]) * b2 + acc;
    acc = static_cast<float>(s1[i]) * b1 + acc;
    acc = static_cast<float>(s0[i]) * b0 + acc;
    d[i] = static_cast<std::uint8_t>(Clamp(static_cast<int>(std::nearbyint(acc)), 0, 255));
  };
  // A value's BGR place is at most 2 past its RGB place: below vector_end - 2 all are vector ones.
  const std::size_t surely_vector = vector_end >= 2 ? vector_end - 2 : 0;
  std::size_t i = 0;
  for (; i < surely_vector; ++i) by_float(i);
  for (; i < n; ++i) {
    const std::size_t channel = i % 3;
    if (i - channel + (2 - channel) < vector_end) {
      by_float(i);
      continue;
    }
    const long long v = static_cast<long long>(s0[i]) * weight[0] +
                        static_cast<long long>(s1[i]) * weight[1] +
                        static_cast<long long>(s2[i]) * weight[2] +
                        static_cast<long long>(s3[i]) * weight[3];
    d[i] = static_cast<std::uint8_t>(
        Clamp(static_cast<int>((v + (1 << (kShift - 1))) >> kShift), 0, 255));
  }
}

}  // namespace

Bitmap FlattenAlpha(Bitmap bitmap) {
  if (bitmap.channels != 4) return bitmap;
  const std::size_t n = static_cast<std::size_t>(bitmap.width) * bitmap.height;
  std::vector<std::uint8_t> rgb(n * 3);
  const std::uint8_t* s = bitmap.pixels.data();
  std::uint8_t* d = rgb.data();
  for (std::size_t i = 0; i < n; ++i, s += 4, d += 3) {
    const int a = s[3];
    const int inv = 255 - a;
    for (int c = 0; c < 3; ++c) d[c] = static_cast<std::uint8_t>((s[c] * a + kBackground * inv + 127) / 255);
  }
  bitmap.pixels = std::move(rgb);
  bitmap.channels = 3;
  return bitmap;
}

Bitmap ResizeCubic(const Bitmap& src, int width, int height) {
  if (src.width == width && src.height == height) return src;
  const std::vector<Tap> xt = Taps(src.width, width);
  const std::vector<Tap> yt = Taps(src.height, height);
  Bitmap out;
  out.width = width;
  out.height = height;
  out.channels = 3;
  out.pixels.resize(static_cast<std::size_t>(width) * height * 3);
  // The four horizontally resized rows in use; source rows are visited in increasing order.
  std::array<int, 4> slot_row = {-1, -1, -1, -1};
  std::array<std::vector<int>, 4> slot;
  for (auto& s : slot) s.resize(static_cast<std::size_t>(width) * 3);
  const std::size_t src_stride = static_cast<std::size_t>(src.width) * 3;
  for (int dy = 0; dy < height; ++dy) {
    const Tap& t = yt[static_cast<std::size_t>(dy)];
    const std::vector<int>* rows[4];
    for (int k = 0; k < 4; ++k) {
      const int sy = Clamp(t.first + k, 0, src.height - 1);
      int found = -1;
      for (int i = 0; i < 4; ++i) {
        if (slot_row[i] == sy) found = i;
      }
      if (found < 0) {
        // Reuse the slot holding the lowest row no longer needed at or after this output row.
        int victim = 0;
        for (int i = 1; i < 4; ++i) {
          if (slot_row[i] < slot_row[victim]) victim = i;
        }
        HorizontalPass(src.pixels.data() + static_cast<std::size_t>(sy) * src_stride, src.width,
                       xt, slot[victim]);
        slot_row[victim] = sy;
        found = victim;
      }
      rows[k] = &slot[found];
    }
    std::uint8_t* d = out.pixels.data() + static_cast<std::size_t>(dy) * width * 3;
    VerticalPass(rows, t.weight, static_cast<std::size_t>(width) * 3, d);
  }
  return out;
}

Bitmap PadCentered(const Bitmap& src, int width, int height, int left, int top) {
  Bitmap out;
  out.width = width;
  out.height = height;
  out.channels = 3;
  out.pixels.assign(static_cast<std::size_t>(width) * height * 3, kPadGrey);
  const std::size_t row_bytes = static_cast<std::size_t>(src.width) * 3;
  for (int y = 0; y < src.height; ++y) {
    std::copy_n(src.pixels.data() + static_cast<std::size_t>(y) * row_bytes, row_bytes,
                out.pixels.data() + (static_cast<std::size_t>(y + top) * width + left) * 3);
  }
  return out;
}

absl::StatusOr<Bitmap> WebpRoundTrip(const Bitmap& rgb, int quality) {
  std::uint8_t* encoded = nullptr;
  const std::size_t size = WebPEncodeRGB(rgb.pixels.data(), rgb.width, rgb.height, rgb.width * 3,
                                         static_cast<float>(quality), &encoded);
  if (size == 0 || encoded == nullptr) {
    WebPFree(encoded);
    return ImageError(ImageErrorKind::kResize);
  }
  Bitmap out;
  out.width = rgb.width;
  out.height = rgb.height;
  out.channels = 3;
  out.pixels.resize(rgb.pixels.size());
  const std::uint8_t* ok = WebPDecodeRGBInto(encoded, size, out.pixels.data(), out.pixels.size(),
                                             rgb.width * 3);
  WebPFree(encoded);
  if (ok == nullptr) return ImageError(ImageErrorKind::kResize);
  return out;
}

}  // namespace tandem::image::internal
