#pragma once

// Image preprocessing as deepseek-recipe 0.2.0 does it for DeepSeek V4.1
// (OpenCvImagePreprocessor().preprocess(bytes, PreprocessOptions(detail, max, low_max))):
//
//   1. sniff the format from the bytes (JPEG, PNG, GIF, WebP only);
//   2. read the declared width and height from the header alone and refuse either above
//      max_dimension_px, before any pixel memory exists;
//   3. decode (first frame of an animation; CMYK/YCCK JPEG, 16-bit, grey, palette, alpha), with
//      the decoders' own size limits set to the checked header size, so a lying header cannot
//      make them allocate more; EXIF orientation is not applied (recipe does not);
//   4. blend transparency onto #FDFDFD, reduce to 8-bit RGB;
//   5. at low detail, scale the long side down to low_detail_max_dimension_px (area averaging);
//   6. fit the V4.1 token budget (token_spec.h): scale bicubically, keeping the aspect ratio, and
//      centre on grey (127) padding to the fitted size (both resizes reproduce OpenCV's arithmetic
//      bit for bit);
//   7. round-trip through lossy WebP at quality 90, as recipe ships WebP to the model server, so
//      that the pixels are the ones a recipe deployment's vision tower sees (optional).
//
//   PreprocessOptions options = ImageLimits{}.OptionsFor(Detail::kHigh, /*image_count=*/1);
//   absl::StatusOr<PreprocessedImage> image = PreprocessImage(bytes, options);
//   // image->width x image->height RGB8 pixels in image->rgb; image->image_tokens prompt positions
//
// Failures carry recipe's kind and message (errors.h); add the image's location with
// WithImageLocation. Thread-safe: no shared state.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::image {

// The request's `detail`. tandem_image does not depend on tandem_recipe (the encoder links this
// library without the protocol layer); recipe::ImageDetail maps one to one, in the same order.
enum class Detail { kLow, kHigh, kOriginal, kAuto };

enum class ImageFormat { kJpeg, kPng, kGif, kWebp };

// "image/jpeg", "image/png", "image/gif", "image/webp".
absl::string_view MimeType(ImageFormat format);

struct ImageHeader {
  ImageFormat format = ImageFormat::kPng;
  std::uint32_t width = 0;  // as declared (GIF: the logical screen)
  std::uint32_t height = 0;
};

// The format, from the leading bytes as recipe's sniffer reads them; kUnsupportedMediaType (or
// kEmptyImage for no bytes) otherwise.
absl::StatusOr<ImageFormat> SniffFormat(absl::string_view bytes);

// Format and declared size, from the header only (no pixel data is read). kDecode when the header
// is malformed; kImageDimensionsTooLarge when a side exceeds max_dimension_px.
absl::StatusOr<ImageHeader> ReadImageHeader(absl::string_view bytes, std::uint32_t max_dimension_px);

struct PreprocessOptions {
  Detail detail = Detail::kHigh;
  std::uint32_t max_dimension_px = 8192;
  std::uint32_t low_detail_max_dimension_px = 512;
  bool webp_roundtrip = true;  // step 7
};

struct PreprocessedImage {
  int width = 0;
  int height = 0;
  int image_tokens = 0;            // model positions the image occupies (token_spec.h)
  std::vector<std::uint8_t> rgb;   // width * height * 3, row-major, HWC, R G B
};

absl::StatusOr<PreprocessedImage> PreprocessImage(absl::string_view bytes,
                                                  const PreprocessOptions& options);

// PreprocessImage's width, height and image_tokens without its pixels. For PNG and JPEG, whose
// decoded size is the declared one, from the header alone: no pixel memory, microseconds (a
// router measures every image of every request; decoding them all there would let a few
// highly compressible 8192 x 8192 images hold gigabytes). Data past the header is not checked:
// a corrupt body fails later, where the image is decoded. GIF and WebP (whose first frame or
// canvas may differ from the header) are decoded. Same refusals as PreprocessImage otherwise.
struct ImageGeometry {
  int width = 0;
  int height = 0;
  int image_tokens = 0;
};
absl::StatusOr<ImageGeometry> MeasureImage(absl::string_view bytes, const PreprocessOptions& options);

}  // namespace tandem::image
