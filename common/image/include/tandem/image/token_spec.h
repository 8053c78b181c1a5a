#pragma once

// DeepSeek V4.1's image token specification (deepseek-recipe's ImageTokenSpec::v41): 14-pixel
// patches, a 3x3 spatial downsample, at most 1024 model tokens per image, and images under
// 544*544 pixels of area upscaled first. An image of W x H pixels occupies
// n_llm_h * (n_llm_w + 1) + 2 model tokens (a newline per row, a start and an end token), and
// sits in the prompt as one placeholder: PreprocessedImage::image_tokens counts the model tokens.
//
//   absl::StatusOr<ResizeResult> r = CalcResize(640, 480);  // 644 x 490, 206 tokens

#include <cstddef>

#include "absl/status/statusor.h"

namespace tandem::image {

inline constexpr std::size_t kPatchSize = 14;
inline constexpr std::size_t kDownsampleRatio = 3;
inline constexpr std::size_t kMaxImageTokens = 1024;
inline constexpr std::size_t kMinImagePixels = 544 * 544;

struct ResizeResult {
  std::size_t n_llm_h = 0;
  std::size_t n_llm_w = 0;
  std::size_t best_height = 0;
  std::size_t best_width = 0;
  std::size_t num_tokens = 0;
  bool operator==(const ResizeResult&) const = default;
};

// The size the image is fitted to and its token count. Fitting repeats until the size is a fixed
// point (recipe allows 10 rounds); a size that does not settle is an InvalidArgument (recipe's
// CalcResizeError), which no image within the dimension limits produces.
absl::StatusOr<ResizeResult> CalcResize(std::size_t width, std::size_t height);

// The model tokens of an image already at `width` x `height` (CalcResize(...).num_tokens).
absl::StatusOr<std::size_t> ImageTokenCount(std::size_t width, std::size_t height);

}  // namespace tandem::image
