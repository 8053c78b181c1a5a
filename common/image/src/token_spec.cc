#include "tandem/image/token_spec.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem::image {
namespace {

constexpr std::size_t kUnit = kPatchSize * kDownsampleRatio;

std::size_t DivCeil(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

// Rust's `f64 as usize`: truncation, saturating at 0 and at the type's maximum.
std::size_t ToSize(double v) {
  if (!(v > 0.0)) return 0;
  if (v >= 1.8446744073709552e19) return SIZE_MAX;
  return static_cast<std::size_t>(v);
}

ResizeResult GridResult(std::size_t best_height, std::size_t best_width) {
  ResizeResult r;
  r.n_llm_h = DivCeil(best_height / kPatchSize, kDownsampleRatio);
  r.n_llm_w = DivCeil(best_width / kPatchSize, kDownsampleRatio);
  r.best_height = best_height;
  r.best_width = best_width;
  r.num_tokens = r.n_llm_h * (r.n_llm_w + 1) + 2;
  return r;
}

// The largest aspect-preserving grid within the token budget. n_llm_h * (n_llm_w + 1) + 2 <= max
// with n_llm_h = ratio * n_llm_w is a quadratic in n_llm_w; its root is the width bound.
ResizeResult SolveResizeRatio(std::size_t height, std::size_t width) {
  const double ratio = static_cast<double>(height) / static_cast<double>(width);
  const double max_w_float =
      std::sqrt((static_cast<double>(kMaxImageTokens) - 2.0) / ratio + 0.25) - 0.5;
  const double max_h_float = max_w_float * ratio;
  std::size_t best_height = 0;
  std::size_t best_width = 0;
  if (max_w_float < 1.0) {
    const std::size_t max_w = 1;
    const std::size_t max_h = (kMaxImageTokens - 2) / (max_w + 1);
    best_width = max_w * kUnit;
    best_height = max_h * kUnit;
  } else if (max_h_float < 1.0) {
    const std::size_t max_h = 1;
    const std::size_t max_w = (kMaxImageTokens - 2) / max_h - 1;
    best_width = max_w * kUnit;
    best_height = max_h * kUnit;
  } else {
    const std::size_t max_w = ToSize(max_w_float);
    const std::size_t max_h = ToSize(max_h_float);
    const double beta_w = static_cast<double>(max_w * kUnit) / static_cast<double>(width);
    const double beta_h = static_cast<double>(max_h * kUnit) / static_cast<double>(height);
    const double beta = std::min(beta_w, beta_h);
    best_width = ToSize(static_cast<double>(width) * beta / kPatchSize) * kPatchSize;
    best_height = ToSize(static_cast<double>(height) * beta / kPatchSize) * kPatchSize;
  }
  return GridResult(best_height, best_width);
}

ResizeResult ResizeOnce(std::size_t width, std::size_t height) {
  const std::size_t pixels = width * height;
  if (pixels < kMinImagePixels && pixels > 0) {
    const double ratio = std::sqrt(static_cast<double>(kMinImagePixels) / pixels);
    width = ToSize(static_cast<double>(width) * ratio);
    height = ToSize(static_cast<double>(height) * ratio);
  }
  ResizeResult r = GridResult(DivCeil(height, kPatchSize) * kPatchSize,
                              DivCeil(width, kPatchSize) * kPatchSize);
  if (r.num_tokens > kMaxImageTokens) r = SolveResizeRatio(height, width);
  return r;
}

}  // namespace

absl::StatusOr<ResizeResult> CalcResize(std::size_t width, std::size_t height) {
  constexpr int kMaxIter = 10;
  ResizeResult result = ResizeOnce(width, height);
  for (int i = 1; i < kMaxIter; ++i) {
    ResizeResult next = ResizeOnce(result.best_width, result.best_height);
    if (next == result) return result;
    result = next;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("image resize did not converge after ", kMaxIter, " iterations for ", width,
                   "x", height));
}

absl::StatusOr<std::size_t> ImageTokenCount(std::size_t width, std::size_t height) {
  absl::StatusOr<ResizeResult> r = CalcResize(width, height);
  if (!r.ok()) return r.status();
  return r->num_tokens;
}

}  // namespace tandem::image
