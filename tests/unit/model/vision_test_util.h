#pragma once
// Helpers of the vision-tower tests: the fixtures of tests/fixtures/vision/ (made by
// tools/fixtures/make_vision_fixtures.py) and the images both sides generate.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tandem::model::testing {

inline std::string VisionFixtureDir(const std::string& name) {
  return std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/vision/" + name;
}

// make_vision_fixtures.py's pattern_image: HWC RGB8.
inline std::vector<std::uint8_t> PatternImage(int width, int height, int seed) {
  std::vector<std::uint8_t> img(static_cast<std::size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) {
        const std::int64_t v =
            (x * 7LL + y * 13LL + c * 101LL + (static_cast<std::int64_t>(x) * y) % 31 +
             seed * 57LL) % 256;
        img[(static_cast<std::size_t>(y) * width + x) * 3 + c] = static_cast<std::uint8_t>(v);
      }
    }
  }
  return img;
}

inline nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

struct ExpectedImage {
  std::string name;
  int width = 0, height = 0, seed = 0, rows = 0, cols = 0;
  std::vector<float> values;  // rows x cols
};

inline std::vector<ExpectedImage> LoadExpected(const std::string& dir) {
  std::vector<ExpectedImage> out;
  const nlohmann::json manifest = ReadJson(dir + "/expected.json");  // outlives the loop
  for (const auto& e : manifest.at("images")) {
    ExpectedImage img{e.at("name"), e.at("width"), e.at("height"), e.at("seed"),
                      e.at("rows"), e.at("cols"), {}};
    img.values.resize(static_cast<std::size_t>(img.rows) * img.cols);
    std::ifstream in(dir + "/" + e.at("file").get<std::string>(), std::ios::binary);
    in.read(reinterpret_cast<char*>(img.values.data()),
            static_cast<std::streamsize>(img.values.size() * sizeof(float)));
    EXPECT_EQ(static_cast<std::size_t>(in.gcount()), img.values.size() * sizeof(float)) << img.name;
    out.push_back(std::move(img));
  }
  return out;
}

// Worst relative error over rows: max_i |got - want| / max_i |want| per row (a row's largest
// magnitude as its scale, so near-zero entries do not dominate).
inline double WorstRowRelError(const std::vector<float>& got, const std::vector<float>& want,
                               int cols) {
  double worst = 0.0;
  for (std::size_t r = 0; r * cols < want.size(); ++r) {
    double diff = 0.0, scale = 0.0;
    for (int i = 0; i < cols; ++i) {
      const std::size_t k = r * cols + i;
      diff = std::max(diff, std::abs(static_cast<double>(got[k]) - want[k]));
      scale = std::max(scale, std::abs(static_cast<double>(want[k])));
    }
    worst = std::max(worst, diff / std::max(scale, 1e-30));
  }
  return worst;
}

}  // namespace tandem::model::testing
