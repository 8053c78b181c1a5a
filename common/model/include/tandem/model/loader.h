#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/model.h"

namespace tandem::model {

struct LoadOptions {
  // Scan every weight for NaN/Inf on load (costs one pass over the weights).
  bool check_finite = false;
  // DeepSeek MLA: decode with the absorbed form (cache latent + rope key only). The naive form
  // expands per-head K/V from the same cache; both must agree.
  bool mla_absorbed = true;
  // Served name; empty means the directory's base name.
  std::string served_name;
};

// Loads a checkpoint from a directory (or a llama2.c .bin file):
//  - llama2.c legacy: model.bin (+ tokenizer.bin beside it)
//  - Hugging Face: config.json + *.safetensors (+ model.safetensors.index.json)
// Weights stay memory-mapped; the backend must be able to read host memory (CPU), or the model
// copies them into the backend's memory.
absl::StatusOr<std::unique_ptr<Model>> LoadModel(const std::string& path,
                                                 const LoadOptions& options,
                                                 kernels::Backend* backend);

// The dtype holding most of a checkpoint's matrix elements (tensors of two or more dimensions),
// from the safetensors headers alone; F32 for a llama2.c checkpoint. What `--bf16-matmul auto`
// asks before the backend (and so the model) exists.
absl::StatusOr<kernels::DType> PredominantMatrixDtype(const std::string& path);

}  // namespace tandem::model
