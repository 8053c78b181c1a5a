#pragma once

// Helpers shared by the tests that run the Hugging Face fixtures of tests/fixtures/ (made by
// tools/fixtures/make_hf_fixtures.py).

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
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

#include <filesystem>
#include <functional>

namespace tandem::model::testing {

// A private copy of a fixture directory that a test may corrupt.
// Forward over consecutive chunks of `tokens` (sizes summing to a prefix of it), kAll logits, one
// Forward per chunk: prefill in one chunk, in several, or token by token.
inline std::vector<float> RunChunks(Model& model, const std::vector<std::int32_t>& tokens,
                                    const std::vector<int>& sizes, TestKv* kv,
                                    const std::vector<std::int32_t>& table) {
  std::vector<float> logits;
  int pos = 0;
  for (int n : sizes) {
    SequenceChunk c;
    c.tokens = std::span<const std::int32_t>(tokens.data() + pos, n);
    c.start_pos = pos;
    c.block_table = table;
    c.logits = LogitsMode::kAll;
    const absl::Status s = model.Forward({&c, 1}, kv->storage, &logits);
    EXPECT_TRUE(s.ok()) << s;
    pos += n;
  }
  return logits;
}

inline std::string CopyFixture(const std::string& name, const std::string& tag) {
  namespace fs = std::filesystem;
  const fs::path dst =
      fs::temp_directory_path() / ("tandem_" + name + "_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(dst);
  fs::copy(FixtureDir(name), dst, fs::copy_options::recursive);
  return dst.string();
}

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Assembles a safetensors file: 8-byte little-endian header length, JSON header padded with
// spaces to 8 bytes (keeps the data aligned), data section.
inline std::string SafetensorsBytes(const nlohmann::json& header, const std::string& data) {
  std::string h = header.dump();
  while ((h.size() + 8) % 8 != 0) h.push_back(' ');
  std::string out(8, '\0');
  std::uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + h + data;
}

struct SafetensorsParts {
  nlohmann::json header;
  std::string data;
};

inline SafetensorsParts SplitSafetensors(const std::string& bytes) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint8_t>(bytes[i]);
  return {nlohmann::json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
}

// Rewrites a safetensors file's header (the data section is kept byte for byte).
inline void EditSafetensorsHeader(const std::string& path,
                                  const std::function<void(nlohmann::json&)>& edit) {
  SafetensorsParts parts = SplitSafetensors(ReadBytes(path));
  edit(parts.header);
  WriteBytes(path, SafetensorsBytes(parts.header, parts.data));
}

// Overwrites the first element of an F32 tensor.
inline void PokeFirstFloat(const std::string& path, const std::string& tensor, float value) {
  SafetensorsParts parts = SplitSafetensors(ReadBytes(path));
  const std::size_t begin = parts.header.at(tensor).at("data_offsets")[0].get<std::size_t>();
  std::memcpy(parts.data.data() + begin, &value, sizeof(value));
  WriteBytes(path, SafetensorsBytes(parts.header, parts.data));
}

}  // namespace tandem::model::testing
