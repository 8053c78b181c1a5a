#pragma once
// Vision towers: a preprocessed image in, rows of the text model's input embeddings out.
//
//   TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<VisionTower> tower, LoadVisionTower(dir, backend));
//   TANDEM_ASSIGN_OR_RETURN(int rows, tower->OutputRows(width, height));
//   TANDEM_ASSIGN_OR_RETURN(std::vector<float> emb, tower->Encode(width, height, rgb));
//   // emb: rows x tower->hidden_size(), row-major, to scatter into the prompt's image positions.
//
// Two towers load from a directory with config.json and safetensors (see docs/vision.md):
//   * DeepSeek-VL (config model_type "deepseek_vl"): SigLIP + aligner, as transformers'
//     DeepseekVLModel; takes image_size x image_size images; mean/std from
//     preprocessor_config.json (CLIP's when absent, as DeepseekVLImageProcessor).
//   * DeepSeek V4.1 (model_type "deepseek_v41_vision"): native-resolution ViT, 14-pixel patches,
//     3x3 merge; takes any width and height that are multiples of 14 (what deepseek_recipe's
//     preprocessing produces) and returns ceil(H/42) * (ceil(W/42) + 1) + 2 rows, recipe's
//     image_tokens for that size.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tandem/kernels/backend.h"

namespace tandem::model {

class VisionTower {
 public:
  virtual ~VisionTower() = default;

  // "deepseek_vl" or "deepseek_v41_vision": the config's model_type.
  virtual std::string_view kind() const = 0;
  // Width of each output row: the text model's hidden size (after the aligner/projector).
  virtual int hidden_size() const = 0;
  // Rows Encode returns for a width x height image; InvalidArgument when the tower cannot take
  // that size.
  virtual absl::StatusOr<int> OutputRows(int width, int height) const = 0;
  // rgb: height x width x 3 bytes (HWC, RGB8, after preprocessing); normalisation is the tower's.
  // Returns OutputRows(width, height) x hidden_size() floats. Thread-safe: scratch is per call.
  virtual absl::StatusOr<std::vector<float>> Encode(int width, int height,
                                                    absl::Span<const std::uint8_t> rgb) const = 0;
  // Stable digest (32 hex digits) of the config files and every tensor's name, dtype, shape and
  // bytes: equal for the same checkpoint on every machine and restart, different when any weight
  // or setting differs. Part of the encoder cache's key.
  virtual const std::string& fingerprint() const = 0;
};

struct VisionLoadOptions {
  bool check_finite = true;  // refuse weights holding NaN or Inf (naming the tensor)
};

// Reads dir/config.json, picks the tower by model_type, maps dir's safetensors (tensors stay in
// the mapping, any of F32/BF16/F16) and checks every shape against the config. `backend` must
// outlive the tower.
absl::StatusOr<std::unique_ptr<VisionTower>> LoadVisionTower(const std::string& dir,
                                                              kernels::Backend* backend,
                                                              const VisionLoadOptions& options = {});

}  // namespace tandem::model
