#pragma once

// Image failures, with deepseek-recipe's error kinds and client-facing messages.
//
// Every failure is an absl::Status (InvalidArgument, or Unavailable/DeadlineExceeded for a fetch)
// whose message is exactly what recipe puts in the protocol's error body, and whose payload
// kImageErrorPayloadUrl holds the kind's name (recipe's Rust `ImageError` variant, e.g.
// "ImageDimensionsTooLarge"), so a server can both render the body and count failures by kind.
//
//   absl::StatusOr<PreprocessedImage> r = PreprocessImage(bytes, options);
//   if (!r.ok()) {
//     absl::Status located = WithImageLocation(r.status(), source.path, index);
//     Reply400(located.message());  // "image[0]: You have uploaded an unsupported image. ..."
//   }

#include <cstddef>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tandem::image {

inline constexpr absl::string_view kImageErrorPayloadUrl = "type.tandem.dev/image.ImageError";

enum class ImageErrorKind {
  kEmptyImage,
  kUnsupportedMediaType,
  kDecode,
  kImageDimensionsTooLarge,
  kResize,
  kImageTooLarge,
  kTotalSizeTooLarge,
  kTooManyImages,
  kInvalidDataUrl,
  kInvalidUrl,
  kUrlTooLong,
  kDestinationRejected,
  kFetch,
};

// Recipe's variant name ("EmptyImage", ...).
absl::string_view ImageErrorKindName(ImageErrorKind kind);

// The message recipe gives every image it cannot read, whatever the cause (empty, unknown format,
// corrupt, too many pixels): clients cannot tell these apart, by design.
inline constexpr absl::string_view kUnsupportedImageMessage =
    "You have uploaded an unsupported image. Please make sure your image is valid and has one of "
    "the following formats: webp, png, jpeg, and gif.";

// A failure of `kind` with recipe's message for it. `size`/`max` are bytes (kImageTooLarge,
// kTotalSizeTooLarge) or counts (kTooManyImages); `detail` is the URL for kInvalidUrl and the
// length for kUrlTooLong.
absl::Status ImageError(ImageErrorKind kind, std::size_t size = 0, std::size_t max = 0,
                        absl::string_view detail = {});

// The kind a status carries; nullopt for a status that is not an image failure.
std::optional<ImageErrorKind> GetImageErrorKind(const absl::Status& status);

// Whether recipe reports the failure against one image ("image[0]: ...") rather than the request.
bool IsPerImageError(ImageErrorKind kind);

// Prefixes a per-image failure with the image's location as recipe does: "<path>.image[<index>]: "
// or, without a path, "image[<index>]: ". Other statuses pass through unchanged.
absl::Status WithImageLocation(const absl::Status& status, absl::string_view path,
                               std::size_t index);

}  // namespace tandem::image
