#pragma once
// The towers behind LoadVisionTower (vision_loader.cc), one file each.
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tandem/model/vision.h"
#include "vision/vision_common.h"

namespace tandem::model::internal {

// Input limits of both towers. recipe's preprocessing keeps images near its token budget (about
// 1.7 M pixels at most) but stretches extreme aspect ratios to long sides (1 x 2048 becomes
// 42 x 16380); the limits leave room for both without letting a bogus size allocate gigabytes.
inline constexpr int kMaxVisionSide = 1 << 16;
inline constexpr std::int64_t kMaxVisionPixels = std::int64_t{1} << 22;

absl::StatusOr<std::unique_ptr<VisionTower>> LoadDeepseekVlTower(const std::string& dir,
                                                                 const VisionJson& config,
                                                                 const std::string& config_text,
                                                                 kernels::Backend* backend,
                                                                 const VisionLoadOptions& options);
absl::StatusOr<std::unique_ptr<VisionTower>> LoadV41VisionTower(const std::string& dir,
                                                                const VisionJson& config,
                                                                const std::string& config_text,
                                                                kernels::Backend* backend,
                                                                const VisionLoadOptions& options);

}  // namespace tandem::model::internal
