#pragma once

// data: URLs as deepseek-recipe accepts them (the WHATWG data: URL processor): "data:" in any
// case, a media type, ";base64" or not, a comma, then a percent-encoded body (base64 after
// percent-decoding when marked so, forgiving of whitespace and missing padding); a fragment is
// dropped. The media type must be one of the four image types (image/jpg accepted as JPEG); the
// bytes' own format is sniffed later and need not agree with it.
//
//   absl::StatusOr<std::string> bytes = DecodeDataUrl(url, limits.max_image_bytes);
//
// Failures (errors.h): kInvalidDataUrl (no "data:", no comma, bad base64), kUnsupportedMediaType,
// kImageTooLarge (checked on the encoded length before decoding, as recipe does, and again after),
// kEmptyImage.

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::image {

struct DataUrlParts {
  std::string mime_type;  // lower-cased essence ("image/png"); "text/plain" when absent or invalid
  bool base64 = false;
  std::string body;  // still percent-encoded, fragment removed
};

absl::StatusOr<DataUrlParts> ParseDataUrl(absl::string_view url);

absl::StatusOr<std::string> DecodeDataUrl(absl::string_view url, std::size_t max_image_bytes);

}  // namespace tandem::image
