#pragma once

// Decoders of the four formats into 8-bit RGB or RGBA, each behaving as the decoder recipe uses
// for that format (OpenCV's imdecode for JPEG, PNG and WebP; the `image` crate for GIF). Callers
// pass the header size ReadImageHeader already checked; a decoder refuses any image whose own
// header disagrees or exceeds it, so no decoder allocates beyond width * height * 4 bytes.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::image::internal {

struct Bitmap {
  int width = 0;
  int height = 0;
  int channels = 3;  // 3: RGB, 4: RGBA (straight alpha)
  std::vector<std::uint8_t> pixels;
};

struct DecodeLimits {
  std::uint32_t max_width = 0;
  std::uint32_t max_height = 0;
};

absl::StatusOr<Bitmap> DecodeJpeg(absl::string_view bytes, const DecodeLimits& limits);
absl::StatusOr<Bitmap> DecodePng(absl::string_view bytes, const DecodeLimits& limits);
absl::StatusOr<Bitmap> DecodeGif(absl::string_view bytes, const DecodeLimits& limits);
absl::StatusOr<Bitmap> DecodeWebp(absl::string_view bytes, const DecodeLimits& limits);

// Blends RGBA onto recipe's inference background #FDFDFD with its integer rounding; RGB passes.
Bitmap FlattenAlpha(Bitmap bitmap);

// Bicubic resize with OpenCV's INTER_CUBIC arithmetic (A = -0.75, replicated borders, 11-bit
// fixed-point coefficients), RGB only.
Bitmap ResizeCubic(const Bitmap& src, int width, int height);

// OpenCV's INTER_AREA downscale (both factors >= 1), RGB only.
Bitmap ResizeArea(const Bitmap& src, int width, int height);

// Centres `src` on a width x height canvas of grey 127 (recipe's padding, the model's mean).
Bitmap PadCentered(const Bitmap& src, int width, int height, int left, int top);

// Lossy WebP at `quality` and back (libwebp), as recipe's output reaches the model server.
absl::StatusOr<Bitmap> WebpRoundTrip(const Bitmap& rgb, int quality);

}  // namespace tandem::image::internal
