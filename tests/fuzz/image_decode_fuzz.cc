// An image file, as a client would upload it: sniffing, the header reader, the four decoders
// (libjpeg, libpng, giflib, libwebp) and the whole preprocessing pipeline. Whatever the bytes,
// PreprocessImage must return (no crash, leak, UB or unbounded allocation: run.sh caps RSS at
// 2 GiB), refusals must carry a kind and recipe's message, and an accepted image must be a fitted
// V4.1 size with exactly width * height * 3 bytes of pixels. The same bytes are also tried as a
// data: URL body. The first byte picks the detail level; the limit is 1024 px so that an
// execution stays in milliseconds (the decoders see the same code paths at any limit).
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "tandem/image/data_url.h"
#include "tandem/image/errors.h"
#include "tandem/image/preprocess.h"
#include "tandem/image/token_spec.h"

namespace {

void CheckRefusal(const absl::Status& status) {
  if (!tandem::image::GetImageErrorKind(status).has_value() || status.message().empty()) {
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace img = tandem::image;
  if (size == 0) return 0;
  const absl::string_view bytes = tandem::fuzz::AsText(data + 1, size - 1);
  img::PreprocessOptions options;
  options.detail = (data[0] & 1) != 0 ? img::Detail::kLow : img::Detail::kHigh;
  options.max_dimension_px = 1024;
  options.low_detail_max_dimension_px = 256;
  options.webp_roundtrip = (data[0] & 2) != 0;

  absl::StatusOr<img::ImageHeader> header = img::ReadImageHeader(bytes, options.max_dimension_px);
  if (!header.ok()) CheckRefusal(header.status());

  absl::StatusOr<img::PreprocessedImage> image = img::PreprocessImage(bytes, options);
  if (!image.ok()) {
    CheckRefusal(image.status());
  } else {
    if (!header.ok()) __builtin_trap();  // decoded without a readable, admissible header
    absl::StatusOr<img::ResizeResult> fit = img::CalcResize(image->width, image->height);
    if (!fit.ok() || fit->best_width != static_cast<std::size_t>(image->width) ||
        fit->best_height != static_cast<std::size_t>(image->height) ||
        fit->num_tokens != static_cast<std::size_t>(image->image_tokens) ||
        image->rgb.size() != static_cast<std::size_t>(image->width) * image->height * 3) {
      __builtin_trap();
    }
  }

  const std::string url = "data:image/png;base64," + std::string(bytes);
  absl::StatusOr<std::string> decoded = img::DecodeDataUrl(url, 1u << 20);
  if (!decoded.ok()) CheckRefusal(decoded.status());
  absl::StatusOr<std::string> raw = img::DecodeDataUrl("data:image/gif," + std::string(bytes), 1u << 20);
  if (!raw.ok()) {
    CheckRefusal(raw.status());
  } else if (raw->size() > bytes.size()) {
    __builtin_trap();  // percent-decoding never grows the body
  }
  return 0;
}
