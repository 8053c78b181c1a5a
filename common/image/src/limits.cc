#include "tandem/image/limits.h"

#include "tandem/image/errors.h"

namespace tandem::image {

PreprocessOptions ImageLimits::OptionsFor(Detail detail, std::size_t image_count) const {
  PreprocessOptions options;
  options.detail = detail;
  options.max_dimension_px = MaxDimension(image_count);
  options.low_detail_max_dimension_px = low_detail_max_dimension_px;
  return options;
}

absl::Status ImageBudget::AdmitCount(std::size_t images) {
  const std::size_t total = images_ + images;
  if (total > limits_.max_images) {
    return ImageError(ImageErrorKind::kTooManyImages, total, limits_.max_images);
  }
  images_ = total;
  return absl::OkStatus();
}

absl::Status ImageBudget::Reserve(std::size_t bytes) {
  if (bytes > limits_.max_image_bytes) {
    return ImageError(ImageErrorKind::kImageTooLarge, bytes, limits_.max_image_bytes);
  }
  if (bytes > limits_.max_total_bytes - bytes_) {
    return ImageError(ImageErrorKind::kTotalSizeTooLarge, bytes_ + bytes, limits_.max_total_bytes);
  }
  bytes_ += bytes;
  return absl::OkStatus();
}

}  // namespace tandem::image
