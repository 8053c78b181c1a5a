// What a checkpoint's matrices are stored in, read before the model (and its backend) exists.

#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "checkpoint/safetensors.h"
#include "tandem/base/status_macros.h"
#include "tandem/model/loader.h"

namespace tandem::model {

absl::StatusOr<kernels::DType> PredominantMatrixDtype(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // llama2.c checkpoints are float32 throughout.
  if (fs::is_regular_file(path, ec) || !fs::exists(fs::path(path) / "config.json", ec)) {
    return kernels::DType::kF32;
  }
  // Every shard's header, each validated on its own: the FP8 scale pairing (which needs the
  // config's block size) is the loader's to check, and does not change which dtype dominates.
  std::map<kernels::DType, std::int64_t> elements;
  for (const fs::directory_entry& entry : fs::directory_iterator(path, ec)) {
    if (entry.path().extension() != ".safetensors") continue;
    TANDEM_ASSIGN_OR_RETURN(const internal::SafetensorsFile file,
                            internal::SafetensorsFile::Open(entry.path().string()));
    for (const auto& [name, tensor] : file.tensors()) {
      if (tensor.shape.size() >= 2) elements[tensor.view.dtype] += tensor.view.numel();
    }
  }
  if (ec) return absl::InvalidArgumentError(absl::StrCat("listing ", path, ": ", ec.message()));
  if (elements.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " holds no matrix in a .safetensors file"));
  }
  // Ties go to the first dtype in enum order (float32 before bf16).
  return std::ranges::max_element(elements, {}, &decltype(elements)::value_type::second)->first;
}

}  // namespace tandem::model
