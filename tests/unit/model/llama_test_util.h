#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/loader.h"
#include "tandem/model/model.h"

namespace tandem::model::testing {

inline std::filesystem::path Stories260KDir() {
  return std::filesystem::path(TANDEM_SHARED_DIR) / "models" / "stories260K";
}

inline std::filesystem::path GreedyFixturePath() {
  return std::filesystem::path(TANDEM_SHARED_DIR) / "fixtures" / "stories260K_greedy.jsonl";
}

#define TANDEM_SKIP_WITHOUT_STORIES260K()                                                  \
  if (!std::filesystem::exists(::tandem::model::testing::Stories260KDir() / "model.bin")) { \
    GTEST_SKIP() << "shared model not found under "                                        \
                 << ::tandem::model::testing::Stories260KDir()                             \
                 << " (configure TANDEM_SHARED_DIR to the directory holding models/)";     \
  }

// Tests run on both CPU backends: the reference defines the semantics, the fast one serves.
inline std::unique_ptr<kernels::Backend> MakeCpuBackend(bool fast) {
  return fast ? kernels::CreateCpuBackend({.num_threads = 2})
              : kernels::CreateReferenceCpuBackend();
}
inline std::string CpuBackendName(const ::testing::TestParamInfo<bool>& info) {
  return info.param ? "Fast" : "Reference";
}

// A paged KV pool in host memory, sized for a model's layout.
class KvPool {
 public:
  KvPool(const KvLayout& layout, int num_blocks, int block_size = 16)
      : data_(static_cast<std::size_t>(num_blocks) * block_size * layout.num_layers *
                  layout.floats_per_token,
              0.0f) {
    storage_.base = data_.data();
    storage_.num_blocks = num_blocks;
    storage_.block_size = block_size;
    storage_.num_layers = layout.num_layers;
    storage_.floats_per_token = layout.floats_per_token;
  }

  const KvStorage& storage() const { return storage_; }
  std::vector<float>& data() { return data_; }

  // Blocks [first, first + count) in order.
  static std::vector<std::int32_t> Blocks(int first, int count) {
    std::vector<std::int32_t> table(count);
    std::iota(table.begin(), table.end(), first);
    return table;
  }

 private:
  std::vector<float> data_;
  KvStorage storage_;
};

// First index of the largest value, as the reference sampler breaks ties.
inline std::int32_t Argmax(const float* v, int n) {
  return static_cast<std::int32_t>(std::max_element(v, v + n) - v);
}

}  // namespace tandem::model::testing
