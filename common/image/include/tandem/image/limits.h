#pragma once

// deepseek-recipe's per-request image limits (its ImageLimits::default()), and the accounting
// that applies them in recipe's order: the image count first, then each image's encoded size and
// the request's running total as the images arrive, then (in preprocessing) the pixel dimensions,
// whose limit drops when a request carries many images.
//
//   ImageLimits limits;
//   ImageBudget budget(limits);
//   TANDEM_RETURN_IF_ERROR(budget.AdmitCount(sources.size()));
//   for (i...) TANDEM_RETURN_IF_ERROR(WithImageLocation(budget.Reserve(bytes[i].size()), path, i));
//   PreprocessOptions options = limits.OptionsFor(detail, sources.size());

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "tandem/image/preprocess.h"

namespace tandem::image {

struct ImageLimits {
  std::size_t max_images = 600;
  std::size_t max_url_len = 8192;
  std::size_t max_image_bytes = 32u << 20;
  std::size_t max_total_bytes = 64u << 20;
  std::uint32_t max_dimension_px = 8192;
  std::uint32_t max_dimension_on_many_images_px = 4096;
  std::size_t many_images_threshold = 15;
  std::uint32_t low_detail_max_dimension_px = 512;

  std::uint32_t MaxDimension(std::size_t image_count) const {
    return image_count < many_images_threshold ? max_dimension_px
                                               : max_dimension_on_many_images_px;
  }
  PreprocessOptions OptionsFor(Detail detail, std::size_t image_count) const;
};

// The count and encoded bytes of one request's images. Not thread-safe; one per request.
class ImageBudget {
 public:
  explicit ImageBudget(const ImageLimits& limits) : limits_(limits) {}

  // kTooManyImages when the request would hold more than max_images (counting earlier calls).
  absl::Status AdmitCount(std::size_t images);
  // kImageTooLarge (per image; locate it) or kTotalSizeTooLarge; a refused reservation keeps
  // nothing.
  absl::Status Reserve(std::size_t bytes);

  std::size_t images() const { return images_; }
  std::size_t bytes() const { return bytes_; }

 private:
  ImageLimits limits_;
  std::size_t images_ = 0;
  std::size_t bytes_ = 0;
};

}  // namespace tandem::image
