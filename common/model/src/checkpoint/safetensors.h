#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tandem/base/mapped_file.h"
#include "tandem/kernels/dtype.h"

namespace tandem::model::internal {

// Block shape of FP8 weight scales: quantization_config.weight_block_size of an FP8 checkpoint
// (DeepSeek-V3's: quant_method "fp8", fmt "e4m3", [128, 128], rows then columns); 128 x 128 when
// the config has none.
struct Fp8BlockSize {
  int rows = 128;
  int cols = 128;
};

// One tensor of a safetensors file, used in place from the mapping. `view` flattens every leading
// dimension into rows (a 1-D tensor is one row; [E, O, I] stacked experts are E*O rows of I).
struct SafetensorsTensor {
  std::vector<std::int64_t> shape;
  kernels::WeightView view;
};

// A memory-mapped .safetensors file whose header has been fully validated: every tensor has a
// supported dtype (F32, BF16, F16, F8_E4M3), a shape whose size matches its byte range, and a byte
// range inside the data section that overlaps no other tensor.
class SafetensorsFile {
 public:
  static absl::StatusOr<SafetensorsFile> Open(const std::string& path);

  const std::map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }
  const std::string& path() const { return file_.path(); }
  // Hands over the mapping the views point into (the views stay valid while it lives).
  MappedFile ReleaseMapping() && { return std::move(file_); }

 private:
  MappedFile file_;
  std::map<std::string, SafetensorsTensor> tensors_;
};

// Every tensor of a checkpoint directory: model.safetensors, or the shards listed by
// model.safetensors.index.json (every tensor its weight_map names must be in the named shard).
// An F8_E4M3 tensor "X" comes with its block scales "X_scale_inv" (F32, [ceil(rows / block.rows),
// ceil(cols / block.cols)], any shard), as DeepSeek ships them: its view carries them and the
// weight stays FP8 in the mapping (the kernels dequantise in registers).
class SafetensorsCheckpoint {
 public:
  static absl::StatusOr<SafetensorsCheckpoint> Open(const std::string& dir,
                                                    Fp8BlockSize fp8_block = {});

  const SafetensorsTensor* Find(absl::string_view name) const;
  bool Contains(absl::string_view name) const { return Find(name) != nullptr; }
  // NotFound naming the tensor when absent.
  absl::StatusOr<kernels::WeightView> Get(absl::string_view name) const;
  // Get, then (when check_finite) fail on the first NaN/Inf naming the tensor.
  absl::StatusOr<kernels::WeightView> Get(absl::string_view name, bool check_finite) const;
  absl::StatusOr<std::vector<std::int64_t>> Shape(absl::string_view name) const;
  const std::map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }

  std::vector<MappedFile> ReleaseMappings() &&;

 private:
  std::vector<SafetensorsFile> files_;
  std::map<std::string, SafetensorsTensor> tensors_;
};

}  // namespace tandem::model::internal
