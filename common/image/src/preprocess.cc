#include "tandem/image/preprocess.h"

#include <algorithm>
#include <cmath>

#include "decode.h"
#include "tandem/image/errors.h"
#include "tandem/image/token_spec.h"

namespace tandem::image {
namespace {

using internal::Bitmap;

constexpr std::size_t kWebpMaxDimension = 16383;  // the largest side WebP can hold
constexpr int kWebpQuality = 90;                  // recipe's output quality

// Round half to even, as recipe's resize_to_best rounds.
int RoundHalfEven(double v) { return static_cast<int>(std::nearbyint(v)); }

absl::StatusOr<Bitmap> Decode(absl::string_view bytes, const ImageHeader& header,
                              std::uint32_t max_dimension) {
  const internal::DecodeLimits limits{max_dimension, max_dimension};
  switch (header.format) {
    case ImageFormat::kJpeg:
      return internal::DecodeJpeg(bytes, limits);
    case ImageFormat::kPng:
      return internal::DecodePng(bytes, limits);
    case ImageFormat::kGif:
      return internal::DecodeGif(bytes, limits);
    case ImageFormat::kWebp:
      return internal::DecodeWebp(bytes, limits);
  }
  return ImageError(ImageErrorKind::kDecode);
}

// Low detail: the long side down to the limit, sides rounded half away from zero (Rust's round).
void LimitLongSideSize(int* width, int* height, std::uint32_t max_dimension) {
  const int long_side = std::max(*width, *height);
  if (long_side <= static_cast<int>(max_dimension)) return;
  const double ratio = static_cast<double>(max_dimension) / long_side;
  const int w = std::max(1, static_cast<int>(std::round(*width * ratio)));
  const int h = std::max(1, static_cast<int>(std::round(*height * ratio)));
  *width = w;
  *height = h;
}

// ... by area averaging (recipe 0.2.0's binary does this with INTER_AREA).
Bitmap LimitLongSide(Bitmap bitmap, std::uint32_t max_dimension) {
  int w = bitmap.width;
  int h = bitmap.height;
  LimitLongSideSize(&w, &h, max_dimension);
  if (w == bitmap.width && h == bitmap.height) return bitmap;
  return internal::ResizeArea(bitmap, w, h);
}

// A fitted side above WebP's limit: the long side onto the patch grid under the limit, the short
// side scaled and rounded up onto the grid, then fitted again (recipe's fit_webp_target_size).
absl::StatusOr<ResizeResult> FitWebpTarget(std::size_t width, std::size_t height) {
  constexpr int kMaxRounds = 6;
  std::size_t w = width;
  std::size_t h = height;
  for (int round = 0; round < kMaxRounds; ++round) {
    absl::StatusOr<ResizeResult> fitted = CalcResize(w, h);
    if (!fitted.ok()) return ImageError(ImageErrorKind::kResize);
    if (fitted->best_width <= kWebpMaxDimension && fitted->best_height <= kWebpMaxDimension) {
      return fitted;
    }
    const std::size_t long_side = std::max(fitted->best_width, fitted->best_height);
    const std::size_t short_side = std::min(fitted->best_width, fitted->best_height);
    const std::size_t scaled_long = kWebpMaxDimension / kPatchSize * kPatchSize;
    const double scaled_short =
        std::round(static_cast<double>(short_side) * scaled_long / static_cast<double>(long_side));
    const std::size_t s = std::max<std::size_t>(1, static_cast<std::size_t>(scaled_short));
    const std::size_t on_grid = (s + kPatchSize - 1) / kPatchSize * kPatchSize;
    if (fitted->best_width >= fitted->best_height) {
      w = scaled_long;
      h = on_grid;
    } else {
      w = on_grid;
      h = scaled_long;
    }
  }
  return ImageError(ImageErrorKind::kResize);
}

// Scale into best_w x best_h keeping the aspect ratio, centred on grey padding.
Bitmap ResizeToBest(const Bitmap& src, int best_w, int best_h) {
  const double image_ratio = static_cast<double>(src.width) / src.height;
  const double target_ratio = static_cast<double>(best_w) / best_h;
  int w = best_w;
  int h = best_h;
  if (image_ratio > target_ratio) {
    h = std::max(1, RoundHalfEven(static_cast<double>(src.height) / src.width * best_w));
  } else if (image_ratio < target_ratio) {
    w = std::max(1, RoundHalfEven(static_cast<double>(src.width) / src.height * best_h));
  }
  Bitmap scaled = internal::ResizeCubic(src, w, h);
  if (w == best_w && h == best_h) return scaled;
  const int left = RoundHalfEven((best_w - w) * 0.5);
  const int top = RoundHalfEven((best_h - h) * 0.5);
  return internal::PadCentered(scaled, best_w, best_h, left, top);
}

}  // namespace

absl::StatusOr<PreprocessedImage> PreprocessImage(absl::string_view bytes,
                                                  const PreprocessOptions& options) {
  if (bytes.empty()) return ImageError(ImageErrorKind::kEmptyImage);
  absl::StatusOr<ImageHeader> header = ReadImageHeader(bytes, options.max_dimension_px);
  if (!header.ok()) return header.status();
  absl::StatusOr<Bitmap> decoded = Decode(bytes, *header, options.max_dimension_px);
  if (!decoded.ok()) return decoded.status();
  Bitmap bitmap = internal::FlattenAlpha(*std::move(decoded));
  if (bitmap.width <= 0 || bitmap.height <= 0) return ImageError(ImageErrorKind::kEmptyImage);
  if (options.detail == Detail::kLow) {
    bitmap = LimitLongSide(std::move(bitmap), options.low_detail_max_dimension_px);
  }
  if (bitmap.width > static_cast<int>(options.max_dimension_px) ||
      bitmap.height > static_cast<int>(options.max_dimension_px)) {
    return ImageError(ImageErrorKind::kImageDimensionsTooLarge);
  }
  absl::StatusOr<ResizeResult> fitted = FitWebpTarget(bitmap.width, bitmap.height);
  if (!fitted.ok()) return fitted.status();
  const int best_w = static_cast<int>(fitted->best_width);
  const int best_h = static_cast<int>(fitted->best_height);
  if (best_w <= 0 || best_h <= 0) return ImageError(ImageErrorKind::kResize);
  if (bitmap.width != best_w || bitmap.height != best_h) {
    bitmap = ResizeToBest(bitmap, best_w, best_h);
  }
  if (options.webp_roundtrip) {
    absl::StatusOr<Bitmap> round_trip = internal::WebpRoundTrip(bitmap, kWebpQuality);
    if (!round_trip.ok()) return round_trip.status();
    bitmap = *std::move(round_trip);
  }
  PreprocessedImage out;
  out.width = best_w;
  out.height = best_h;
  // recipe counts the tokens of the fitted size again (image_token_adjustment + 1).
  absl::StatusOr<std::size_t> tokens = ImageTokenCount(fitted->best_width, fitted->best_height);
  if (!tokens.ok()) return ImageError(ImageErrorKind::kResize);
  out.image_tokens = static_cast<int>(*tokens);
  out.rgb = std::move(bitmap.pixels);
  return out;
}

absl::StatusOr<ImageGeometry> MeasureImage(absl::string_view bytes,
                                           const PreprocessOptions& options) {
  if (bytes.empty()) return ImageError(ImageErrorKind::kEmptyImage);
  absl::StatusOr<ImageHeader> header = ReadImageHeader(bytes, options.max_dimension_px);
  if (!header.ok()) return header.status();
  if (header->format != ImageFormat::kPng && header->format != ImageFormat::kJpeg) {
    PreprocessOptions no_webp = options;
    no_webp.webp_roundtrip = false;  // changes pixels, never the size
    absl::StatusOr<PreprocessedImage> full = PreprocessImage(bytes, no_webp);
    if (!full.ok()) return full.status();
    return ImageGeometry{full->width, full->height, full->image_tokens};
  }
  int width = static_cast<int>(header->width);
  int height = static_cast<int>(header->height);
  if (width <= 0 || height <= 0) return ImageError(ImageErrorKind::kEmptyImage);
  if (options.detail == Detail::kLow) {
    LimitLongSideSize(&width, &height, options.low_detail_max_dimension_px);
  }
  if (width > static_cast<int>(options.max_dimension_px) ||
      height > static_cast<int>(options.max_dimension_px)) {
    return ImageError(ImageErrorKind::kImageDimensionsTooLarge);
  }
  absl::StatusOr<ResizeResult> fitted = FitWebpTarget(width, height);
  if (!fitted.ok()) return fitted.status();
  if (fitted->best_width == 0 || fitted->best_height == 0) {
    return ImageError(ImageErrorKind::kResize);
  }
  absl::StatusOr<std::size_t> tokens = ImageTokenCount(fitted->best_width, fitted->best_height);
  if (!tokens.ok()) return ImageError(ImageErrorKind::kResize);
  return ImageGeometry{static_cast<int>(fitted->best_width), static_cast<int>(fitted->best_height),
                       static_cast<int>(*tokens)};
}

}  // namespace tandem::image
