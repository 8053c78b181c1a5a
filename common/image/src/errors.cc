#include "tandem/image/errors.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace tandem::image {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

struct KindEntry {
  ImageErrorKind kind;
  absl::string_view name;
};

constexpr KindEntry kKinds[] = {
    {ImageErrorKind::kEmptyImage, "EmptyImage"},
    {ImageErrorKind::kUnsupportedMediaType, "UnsupportedMediaType"},
    {ImageErrorKind::kDecode, "Decode"},
    {ImageErrorKind::kImageDimensionsTooLarge, "ImageDimensionsTooLarge"},
    {ImageErrorKind::kResize, "Resize"},
    {ImageErrorKind::kImageTooLarge, "ImageTooLarge"},
    {ImageErrorKind::kTotalSizeTooLarge, "TotalSizeTooLarge"},
    {ImageErrorKind::kTooManyImages, "TooManyImages"},
    {ImageErrorKind::kInvalidDataUrl, "InvalidDataUrl"},
    {ImageErrorKind::kInvalidUrl, "InvalidUrl"},
    {ImageErrorKind::kUrlTooLong, "UrlTooLong"},
    {ImageErrorKind::kDestinationRejected, "DestinationRejected"},
    {ImageErrorKind::kFetch, "Fetch"},
};

std::string MessageFor(ImageErrorKind kind, std::size_t size, std::size_t max,
                       absl::string_view detail) {
  switch (kind) {
    case ImageErrorKind::kImageTooLarge:
      return absl::StrCat("image file size exceeds limit ", max / kMiB, " MB");
    case ImageErrorKind::kTotalSizeTooLarge:
      return absl::StrCat("Total image size exceeds the limit: max ", max / kMiB,
                          " MB per request, got ", size / kMiB, " MB");
    case ImageErrorKind::kTooManyImages:
      return absl::StrCat("Too many images: max ", max, " images per request, got ", size);
    case ImageErrorKind::kInvalidUrl:
      return absl::StrCat("invalid url: \"", detail, "\"");
    case ImageErrorKind::kUrlTooLong:
      return absl::StrCat("external link length ", size, " too long, max link length ", max);
    case ImageErrorKind::kDestinationRejected:
      return absl::StrCat("image url destination is not allowed: ", detail);
    case ImageErrorKind::kFetch:
      return absl::StrCat("Failed to download image: ", detail);
    default:
      return std::string(kUnsupportedImageMessage);
  }
}

}  // namespace

absl::string_view ImageErrorKindName(ImageErrorKind kind) {
  for (const KindEntry& e : kKinds) {
    if (e.kind == kind) return e.name;
  }
  return "Unknown";
}

absl::Status ImageError(ImageErrorKind kind, std::size_t size, std::size_t max,
                        absl::string_view detail) {
  absl::StatusCode code = kind == ImageErrorKind::kFetch ? absl::StatusCode::kUnavailable
                                                         : absl::StatusCode::kInvalidArgument;
  absl::Status status(code, MessageFor(kind, size, max, detail));
  status.SetPayload(kImageErrorPayloadUrl, absl::Cord(ImageErrorKindName(kind)));
  return status;
}

std::optional<ImageErrorKind> GetImageErrorKind(const absl::Status& status) {
  auto payload = status.GetPayload(kImageErrorPayloadUrl);
  if (!payload.has_value()) return std::nullopt;
  std::string name(*payload);
  for (const KindEntry& e : kKinds) {
    if (e.name == name) return e.kind;
  }
  return std::nullopt;
}

bool IsPerImageError(ImageErrorKind kind) {
  switch (kind) {
    case ImageErrorKind::kTotalSizeTooLarge:
    case ImageErrorKind::kTooManyImages:
    case ImageErrorKind::kInvalidUrl:
    case ImageErrorKind::kUrlTooLong:
    case ImageErrorKind::kDestinationRejected:
    case ImageErrorKind::kFetch:
      return false;
    default:
      return true;
  }
}

absl::Status WithImageLocation(const absl::Status& status, absl::string_view path,
                               std::size_t index) {
  std::optional<ImageErrorKind> kind = GetImageErrorKind(status);
  if (!kind.has_value() || !IsPerImageError(*kind)) return status;
  std::string where = path.empty() ? absl::StrCat("image[", index, "]")
                                   : absl::StrCat(path, ".image[", index, "]");
  absl::Status located(status.code(), absl::StrCat(where, ": ", status.message()));
  located.SetPayload(kImageErrorPayloadUrl, absl::Cord(ImageErrorKindName(*kind)));
  return located;
}

}  // namespace tandem::image
