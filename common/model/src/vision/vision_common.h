#pragma once
// Pieces both vision towers share: config reading, weight mapping with shape checks, the weights'
// fingerprint, input validation, patch extraction with normalisation, and backend scratch.
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "checkpoint/safetensors.h"
#include "nlohmann/json.hpp"
#include "tandem/kernels/backend.h"

namespace tandem::model::internal {

using VisionJson = nlohmann::json;

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, std::size_t max_bytes);
absl::StatusOr<VisionJson> ParseJsonObject(const std::string& text, const std::string& source);

// Typed reads of one config field with a range check; the error names the file and the field.
absl::StatusOr<int> JsonInt(const VisionJson& j, const char* key, int lo, int hi,
                            const std::string& source);
absl::StatusOr<float> JsonFloat(const VisionJson& j, const char* key, float lo, float hi,
                                const std::string& source);
absl::StatusOr<std::array<float, 3>> JsonFloat3(const VisionJson& j, const char* key, float lo,
                                                float hi, const std::string& source);

// The same, with a default when the key is absent (configs saved as a diff from the defaults).
inline absl::StatusOr<int> JsonIntOr(const VisionJson& j, const char* key, int fallback, int lo,
                                     int hi, const std::string& source) {
  return j.contains(key) ? JsonInt(j, key, lo, hi, source) : absl::StatusOr<int>(fallback);
}
inline absl::StatusOr<float> JsonFloatOr(const VisionJson& j, const char* key, float fallback,
                                         float lo, float hi, const std::string& source) {
  return j.contains(key) ? JsonFloat(j, key, lo, hi, source) : absl::StatusOr<float>(fallback);
}

// Per-channel pixel normalisation: (v * rescale - mean[c]) / std[c].
struct PixelNorm {
  std::array<float, 3> mean{};
  std::array<float, 3> std{};
  float rescale = 1.0f / 255.0f;
};

// Weight lookup against one checkpoint: every tensor is shape-checked (and optionally checked
// for NaN/Inf) under its checkpoint name.
class WeightTaker {
 public:
  WeightTaker(const SafetensorsCheckpoint& ckpt, std::string prefix, bool check_finite)
      : ckpt_(ckpt), prefix_(std::move(prefix)), check_finite_(check_finite) {}
  absl::StatusOr<kernels::WeightView> Matrix(absl::string_view name, std::int64_t rows,
                                             std::int64_t cols) const;
  absl::StatusOr<kernels::WeightView> Vector(absl::string_view name, std::int64_t n) const {
    return Matrix(name, 1, n);
  }
  // A Conv2d weight [out][3][patch][patch] as the [out][3 * patch * patch] GEMM matrix.
  absl::StatusOr<kernels::WeightView> PatchConv(absl::string_view name, std::int64_t out,
                                                int patch) const;

 private:
  const SafetensorsCheckpoint& ckpt_;
  std::string prefix_;
  bool check_finite_;
};

// 32 hex digits over the config texts and every tensor (name, dtype, shape, bytes) in name order.
std::string VisionFingerprint(absl::Span<const std::string> config_texts,
                              const SafetensorsCheckpoint& ckpt);

// Size and buffer checks shared by both towers: positive sizes within max_side and max_pixels,
// and exactly width * height * 3 bytes.
absl::Status ValidateSize(int width, int height, int max_side, std::int64_t max_pixels);
absl::Status ValidateRgb(int width, int height, absl::Span<const std::uint8_t> rgb, int max_side,
                         std::int64_t max_pixels);

// HWC RGB8 -> [rows * cols][3 * patch * patch] normalised patch vectors, each in Conv2d weight
// order (channel, then patch row, then patch column); rows = height / patch, cols = width / patch.
void ExtractPatches(const std::uint8_t* rgb, int width, int height, int patch,
                    const PixelNorm& norm, float* out);

// Floats in the backend's memory, freed with it.
class BackendFloats {
 public:
  BackendFloats(kernels::Backend* backend, std::size_t n)
      : backend_(backend), data_(backend->AllocateFloats(n)), size_(n) {}
  ~BackendFloats() { backend_->Free(data_); }
  BackendFloats(const BackendFloats&) = delete;
  BackendFloats& operator=(const BackendFloats&) = delete;
  float* get() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  kernels::Backend* backend_;
  float* data_;
  std::size_t size_;
};

// y = x * w^T (+ bias when given).
inline void Linear(kernels::Backend& b, const float* x, std::int64_t rows,
                   const kernels::WeightView& w, const kernels::WeightView& bias, float* y) {
  b.MatMul(x, rows, w, y);
  if (!bias.empty()) b.AddBias(y, rows, bias);
}

// Bidirectional attention over separate [n][heads * head_dim] q, k, v buffers.
struct FullAttentionShape {
  std::int64_t n = 0;
  int heads = 0;
  int head_dim = 0;
  kernels::FullAttentionParams Params(const float* q, const float* k, const float* v,
                                      float* out) const {
    const std::int64_t d = static_cast<std::int64_t>(heads) * head_dim;
    return kernels::FullAttentionParams{q,
                                        k,
                                        v,
                                        out,
                                        static_cast<int>(n),
                                        heads,
                                        head_dim,
                                        d,
                                        d,
                                        d,
                                        1.0f / std::sqrt(static_cast<float>(head_dim))};
  }
};

}  // namespace tandem::model::internal
