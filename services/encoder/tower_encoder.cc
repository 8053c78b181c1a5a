#include "tower_encoder.h"

#include "absl/strings/str_cat.h"

namespace tandem::encoder {

TowerEncoder::TowerEncoder(std::unique_ptr<model::VisionTower> tower, image::ImageLimits limits)
    : tower_(std::move(tower)),
      limits_(limits),
      identity_{tower_->fingerprint(), kPreprocessVersion} {}

absl::StatusOr<Embedding> TowerEncoder::Encode(absl::string_view image_bytes,
                                               v1::ImageDetailLevel detail) {
  image::Detail d = image::Detail::kHigh;
  if (detail == v1::IMAGE_DETAIL_LOW) d = image::Detail::kLow;
  if (detail == v1::IMAGE_DETAIL_ORIGINAL) d = image::Detail::kOriginal;
  // One image per call: the request-wide limits (count, total bytes, the smaller dimension
  // limit of many-image requests) were the router's to apply.
  auto pre = image::PreprocessImage(image_bytes, limits_.OptionsFor(d, 1));
  if (!pre.ok()) return pre.status();
  auto rows = tower_->OutputRows(pre->width, pre->height);
  if (!rows.ok()) return rows.status();
  if (*rows != pre->image_tokens) {
    // The prompt reserved image_tokens positions; any other count would misalign it.
    return absl::InternalError(absl::StrCat("the vision tower gives ", *rows, " rows for ",
                                            pre->width, "x", pre->height, " but the prompt holds ",
                                            pre->image_tokens, " positions"));
  }
  auto data = tower_->Encode(pre->width, pre->height, pre->rgb);
  if (!data.ok()) return data.status();
  Embedding e;
  e.rows = *rows;
  e.hidden = tower_->hidden_size();
  e.width = pre->width;
  e.height = pre->height;
  e.data = std::move(*data);
  return e;
}

}  // namespace tandem::encoder
