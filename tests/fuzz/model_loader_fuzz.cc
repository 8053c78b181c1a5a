// Checkpoints through model::LoadModel with weight scanning on: a llama2.c model.bin (header
// validation, size arithmetic), or a Hugging Face directory (config.json for every supported
// architecture, safetensors, the shard index and the per-architecture weight shape checks).
// Input: a mode byte, then
//   0: model.bin
//   1: config.json '\0' model.safetensors
//   2: config.json '\0' model.safetensors.index.json '\0' model-00001-of-00001.safetensors
#include <cstdint>
#include <filesystem>
#include <string>

#include "fuzz_util.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/loader.h"

namespace {

namespace fs = std::filesystem;
using tandem::fuzz::WriteFile;

// Cuts off the part before the first '\0'; the rest stays binary.
absl::string_view TakeText(absl::string_view& rest) {
  const std::size_t split = rest.find('\0');
  const absl::string_view text = rest.substr(0, split);
  rest = split == absl::string_view::npos ? absl::string_view() : rest.substr(split + 1);
  return text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto backend = tandem::kernels::CreateReferenceCpuBackend();
  if (size < 1) return 0;
  const int mode = data[0] % 3;
  absl::string_view rest = tandem::fuzz::AsText(data + 1, size - 1);
  const fs::path dir = fs::path(tandem::fuzz::ScratchDir()) / "model";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string path = dir.string();
  if (mode == 0) {
    path = (dir / "model.bin").string();
    WriteFile(path, rest);
  } else {
    WriteFile((dir / "config.json").string(), TakeText(rest));
    if (mode == 2) {
      WriteFile((dir / "model.safetensors.index.json").string(), TakeText(rest));
      WriteFile((dir / "model-00001-of-00001.safetensors").string(), rest);
    } else {
      WriteFile((dir / "model.safetensors").string(), rest);
    }
  }
  tandem::model::LoadOptions options;
  options.check_finite = true;
  options.served_name = "fuzz";
  (void)tandem::model::LoadModel(path, options, backend.get());
  return 0;
}
