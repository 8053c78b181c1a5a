// LoadVisionTower: config.json's model_type picks the tower.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tandem/base/status_macros.h"
#include "tandem/model/vision.h"
#include "vision/vision_towers.h"

namespace tandem::model {

absl::StatusOr<std::unique_ptr<VisionTower>> LoadVisionTower(const std::string& dir,
                                                             kernels::Backend* backend,
                                                             const VisionLoadOptions& options) {
  if (backend == nullptr) return absl::InvalidArgumentError("LoadVisionTower: no backend");
  const std::string path = dir + "/config.json";
  TANDEM_ASSIGN_OR_RETURN(std::string text, internal::ReadSmallFile(path, 1 << 20));
  TANDEM_ASSIGN_OR_RETURN(internal::VisionJson config, internal::ParseJsonObject(text, path));
  const auto type = config.find("model_type");
  const std::string kind =
      type != config.end() && type->is_string() ? type->get<std::string>() : "";
  if (kind == "deepseek_vl") {
    return internal::LoadDeepseekVlTower(dir, config, text, backend, options);
  }
  if (kind == "deepseek_v41_vision") {
    return internal::LoadV41VisionTower(dir, config, text, backend, options);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": model_type \"", kind,
      "\" is not a vision tower (expected \"deepseek_vl\" or \"deepseek_v41_vision\")"));
}

}  // namespace tandem::model
