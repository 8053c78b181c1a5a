// A .safetensors file: the header parser and its checks (dtypes, shapes, data_offsets inside the
// data section, no overlaps, alignment). Every tensor it accepts must lie inside the file and
// agree with its shape, and reading every element must be safe.
#include <cstdint>
#include <string>

#include "checkpoint/safetensors.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = tandem::fuzz::ScratchDir() + "/model.safetensors";
  tandem::fuzz::WriteFile(path, tandem::fuzz::AsText(data, size));
  auto file = tandem::model::internal::SafetensorsFile::Open(path);
  if (!file.ok()) return 0;
  tandem::MappedFile mapping = std::move(*file).ReleaseMapping();
  const auto* begin = mapping.data();
  const auto* end = begin + mapping.size();
  float sum = 0;
  for (const auto& [name, tensor] : file->tensors()) {
    const tandem::kernels::WeightView& v = tensor.view;
    if (v.rows < 0 || v.cols < 0) __builtin_trap();
    std::int64_t numel = 1;
    for (std::int64_t d : tensor.shape) {
      if (d < 0) __builtin_trap();
      numel *= d;
    }
    if (numel != v.numel()) __builtin_trap();
    const auto* first = static_cast<const std::uint8_t*>(v.data);
    const std::int64_t bytes = v.numel() * static_cast<std::int64_t>(tandem::kernels::DTypeSize(v.dtype));
    if (first < begin || first > end || bytes > end - first) __builtin_trap();
    for (std::int64_t r = 0; r < v.rows; ++r) {
      for (std::int64_t c = 0; c < v.cols; ++c) sum += v.At(r, c);
    }
  }
  (void)sum;
  return 0;
}
