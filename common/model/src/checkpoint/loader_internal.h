#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/loader.h"
#include "tandem/model/model.h"

namespace tandem::model::internal {

// llama2.c legacy checkpoint: `file` is the .bin itself.
absl::StatusOr<std::unique_ptr<Model>> LoadLlama2c(const std::string& file,
                                                   const LoadOptions& options,
                                                   kernels::Backend* backend);

// Hugging Face directory: config.json + safetensors.
absl::StatusOr<std::unique_ptr<Model>> LoadHuggingFace(const std::string& dir,
                                                       const LoadOptions& options,
                                                       kernels::Backend* backend);

}  // namespace tandem::model::internal
