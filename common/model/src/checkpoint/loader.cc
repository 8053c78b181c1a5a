#include "tandem/model/loader.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "checkpoint/loader_internal.h"

namespace tandem::model {

absl::StatusOr<std::unique_ptr<Model>> LoadModel(const std::string& path,
                                                 const LoadOptions& options,
                                                 kernels::Backend* backend) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return internal::LoadLlama2c(path, options, backend);
  if (!fs::is_directory(path, ec)) {
    return absl::NotFoundError(absl::StrCat("model path ", path, " does not exist"));
  }
  if (fs::exists(fs::path(path) / "config.json", ec)) {
    return internal::LoadHuggingFace(path, options, backend);
  }
  if (fs::exists(fs::path(path) / "model.bin", ec)) {
    return internal::LoadLlama2c((fs::path(path) / "model.bin").string(), options, backend);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("model directory ", path,
                   " has neither config.json (Hugging Face) nor model.bin (llama2.c)"));
}

}  // namespace tandem::model
