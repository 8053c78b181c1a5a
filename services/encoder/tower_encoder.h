#pragma once

#include <memory>
#include <string>

#include "image_encoder.h"
#include "tandem/image/limits.h"
#include "tandem/model/vision.h"

namespace tandem::encoder {

// Bumped whenever the pixels handed to the tower could change for the same bytes (decoders,
// resize, padding, the WebP round trip): cached rows from before must not be served after.
inline constexpr char kPreprocessVersion[] = "deepseek-recipe-0.2.0/v4.1/webp90";

// Recipe's preprocessing (common/image) followed by a vision tower (common/model/vision.h).
class TowerEncoder final : public ImageEncoder {
 public:
  TowerEncoder(std::unique_ptr<model::VisionTower> tower, image::ImageLimits limits);

  const EncodingIdentity& identity() const override { return identity_; }
  absl::StatusOr<Embedding> Encode(absl::string_view image_bytes,
                                   v1::ImageDetailLevel detail) override;
  const model::VisionTower& tower() const { return *tower_; }

 private:
  const std::unique_ptr<model::VisionTower> tower_;
  const image::ImageLimits limits_;
  const EncodingIdentity identity_;
};

}  // namespace tandem::encoder
