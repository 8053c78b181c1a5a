#pragma once

// Helpers shared by the tests that run the Hugging Face fixtures of tests/fixtures/ (made by
// tools/fixtures/make_hf_fixtures.py).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tandem/model/model.h"

namespace tandem::model::testing {

inline std::string FixtureDir(const std::string& name) {
  return std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/" + name;
}

struct Reference {
  std::vector<std::int32_t> prompt;
  std::vector<std::vector<float>> prompt_logits;
  std::vector<std::int32_t> generated;
  std::vector<std::vector<float>> decode_logits;
  nlohmann::json raw;
};

inline Reference LoadReference(const std::string& fixture) {
  std::ifstream in(FixtureDir(fixture) + "/reference.json");
  std::stringstream ss;
  ss << in.rdbuf();
  Reference r;
  r.raw = nlohmann::json::parse(ss.str());
  r.prompt = r.raw.at("prompt_ids").get<std::vector<std::int32_t>>();
  r.prompt_logits = r.raw.at("prompt_logits").get<std::vector<std::vector<float>>>();
  r.generated = r.raw.at("generated_ids").get<std::vector<std::int32_t>>();
  r.decode_logits = r.raw.at("decode_logits").get<std::vector<std::vector<float>>>();
  return r;
}

// Relative error of one logits row: max_i |got_i - want_i| / max_i |want_i|. Normalising by the
// row's largest magnitude keeps near-zero logits from dominating.
inline double RowRelError(const float* got, const std::vector<float>& want) {
  double diff = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return diff / scale;
}

// Rows of `got` (vocab floats each) against reference rows; returns the worst relative error.
inline double MaxRelError(const std::vector<float>& got,
                          const std::vector<std::vector<float>>& want) {
  EXPECT_EQ(got.size(), want.size() * (want.empty() ? 0 : want[0].size()));
  double worst = 0.0;
  for (std::size_t r = 0; r < want.size() && (r + 1) * want[r].size() <= got.size(); ++r) {
    worst = std::max(worst, RowRelError(got.data() + r * want[r].size(), want[r]));
  }
  return worst;
}

// A paged pool the tests own: identity block tables, one per sequence slot.
struct TestKv {
  TestKv(KvLayout layout, int blocks, int block_size = 4)
      : floats(static_cast<std::size_t>(blocks) * layout.num_layers * block_size *
                   layout.floats_per_token,
               0.0f) {
    storage.base = floats.data();
    storage.num_blocks = blocks;
    storage.block_size = block_size;
    storage.num_layers = layout.num_layers;
    storage.floats_per_token = layout.floats_per_token;
  }
  // Blocks [first, first + count) in a scrambled (reversed) order, to exercise the block table.
  static std::vector<std::int32_t> Table(int first, int count) {
    std::vector<std::int32_t> t(count);
    std::iota(t.begin(), t.end(), first);
    std::reverse(t.begin(), t.end());
    return t;
  }
  std::vector<float> floats;
  KvStorage storage;
};

}  // namespace tandem::model::testing
