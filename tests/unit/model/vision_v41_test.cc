// The DeepSeek V4.1 vision tower against tools/fixtures/v41_vision_reference.py (tiny random
// weights, tests/fixtures/vision/v41), and its row count against deepseek_recipe's image_tokens.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <utility>

#include "gtest/gtest.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/vision.h"
#include "vision_test_util.h"

namespace tandem::model {
namespace {

using testing::LoadExpected;
using testing::PatternImage;
using testing::ReadJson;
using testing::VisionFixtureDir;
using testing::WorstRowRelError;

std::unique_ptr<VisionTower> LoadV41(kernels::Backend* backend) {
  auto tower = LoadVisionTower(VisionFixtureDir("v41"), backend);
  EXPECT_TRUE(tower.ok()) << tower.status();
  return tower.ok() ? *std::move(tower) : nullptr;
}

class V41TowerTest : public ::testing::TestWithParam<bool> {};

TEST_P(V41TowerTest, MatchesTorchReference) {
  // v41_bf16: the same model with BF16 weights, read in place.
  for (const char* fixture : {"v41", "v41_bf16"}) {
    SCOPED_TRACE(fixture);
    auto backend = GetParam() ? kernels::CreateCpuBackend({.num_threads = 2})
                              : kernels::CreateReferenceCpuBackend();
    auto tower = LoadVisionTower(VisionFixtureDir(fixture), backend.get());
    ASSERT_TRUE(tower.ok()) << tower.status();
    EXPECT_EQ((*tower)->kind(), "deepseek_v41_vision");
    EXPECT_EQ((*tower)->hidden_size(), 48);
    const auto expected = LoadExpected(VisionFixtureDir(fixture));
    ASSERT_GE(expected.size(), 3u);
    for (const auto& e : expected) {
      if (!GetParam() && e.width * e.height > 100000) continue;  // scalar attention: small only
      auto rows = (*tower)->OutputRows(e.width, e.height);
      ASSERT_TRUE(rows.ok()) << rows.status();
      EXPECT_EQ(*rows, e.rows) << e.name;
      auto out = (*tower)->Encode(e.width, e.height, PatternImage(e.width, e.height, e.seed));
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ(out->size(), e.values.size()) << e.name;
      const double err = WorstRowRelError(*out, e.values, e.cols);
      EXPECT_LT(err, 1e-4) << e.name;
      std::printf("%s %s: worst row relative error %.3g\n", fixture, e.name.c_str(), err);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, V41TowerTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Fast" : "Reference"; });

TEST(V41Tower, OutputRowsEqualRecipeImageTokens) {
  // tools/fixtures/make_vision_token_table.py: recipe's preprocessed sizes (both detail levels,
  // extreme aspect ratios, up- and down-scaled sources) and its image_tokens for each.
  auto backend = kernels::CreateCpuBackend({.num_threads = 1});
  auto tower = LoadV41(backend.get());
  ASSERT_NE(tower, nullptr);
  const nlohmann::json table = ReadJson(VisionFixtureDir("recipe_tokens.json"));
  int checked = 0;
  for (const auto& e : table.at("entries")) {
    auto rows = tower->OutputRows(e.at("width"), e.at("height"));
    ASSERT_TRUE(rows.ok()) << e.dump() << " " << rows.status();
    EXPECT_EQ(*rows, e.at("image_tokens").get<int>()) << e.dump();
    ++checked;
  }
  EXPECT_GT(checked, 200);
}

TEST(V41Tower, EveryPixelRegionReachesItsRows) {
  // Changing one 42x42 cell's pixels changes that merged token's row and (through attention) the
  // others, never the begin/newline/end rows: checks the layout [begin, row0..., newline, ...,
  // end] that the row count alone would not.
  auto backend = kernels::CreateCpuBackend({.num_threads = 2});
  auto tower = LoadV41(backend.get());
  ASSERT_NE(tower, nullptr);
  const int w = 126, h = 84;  // 3 x 2 merged tokens, rows: 1 + 2 * (3 + 1) + 1 = 10
  auto img = PatternImage(w, h, 4);
  auto a = tower->Encode(w, h, img);
  for (int y = 42; y < 84; ++y) {
    for (int x = 84; x < 126; ++x) img[(y * w + x) * 3] ^= 0x55;
  }
  auto b = tower->Encode(w, h, img);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), 10u * 48);
  auto row_diff = [&](int r) {
    double d = 0;
    for (int i = 0; i < 48; ++i) d = std::max(d, std::abs(double((*a)[r * 48 + i]) - (*b)[r * 48 + i]));
    return d;
  };
  for (int fixed : {0, 4, 8, 9}) EXPECT_EQ(row_diff(fixed), 0.0) << "row " << fixed;
  EXPECT_GT(row_diff(7), 1e-3);  // the changed cell: second merged row, third token
  // Newline rows equal each other, as do nothing else.
  for (int i = 0; i < 48; ++i) EXPECT_EQ((*a)[4 * 48 + i], (*a)[8 * 48 + i]);
}

TEST(V41Tower, ConcurrentEncodesMatchSequentialOnes) {
  // The encoder service runs several Encode calls on one tower and one backend at once.
  auto backend = kernels::CreateCpuBackend({.num_threads = 2});
  auto tower = LoadV41(backend.get());
  ASSERT_NE(tower, nullptr);
  const std::pair<int, int> sizes[] = {{126, 84}, {70, 42}, {168, 140}, {42, 98}};
  std::vector<std::vector<float>> sequential;
  for (int i = 0; i < 4; ++i) {
    auto out = tower->Encode(sizes[i].first, sizes[i].second,
                             PatternImage(sizes[i].first, sizes[i].second, i));
    ASSERT_TRUE(out.ok());
    sequential.push_back(*std::move(out));
  }
  std::vector<std::vector<float>> concurrent(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int rep = 0; rep < 3; ++rep) {
        auto out = tower->Encode(sizes[i].first, sizes[i].second,
                                 PatternImage(sizes[i].first, sizes[i].second, i));
        if (out.ok()) concurrent[i] = *std::move(out);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(concurrent[i], sequential[i]) << i;
}

TEST(V41Tower, RefusesSizesOffThePatchGridAndBadBuffers) {
  auto backend = kernels::CreateCpuBackend({.num_threads = 1});
  auto tower = LoadV41(backend.get());
  ASSERT_NE(tower, nullptr);
  EXPECT_EQ(tower->OutputRows(43, 42).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tower->OutputRows(0, 42).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tower->OutputRows(14, 14 * 10000).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tower->OutputRows(14 * 4000, 14 * 4000).status().code(),
            absl::StatusCode::kInvalidArgument);  // each side fine, the area not
  EXPECT_EQ(tower->Encode(43, 42, PatternImage(43, 42, 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto img = PatternImage(42, 42, 0);
  img.pop_back();
  EXPECT_EQ(tower->Encode(42, 42, img).status().code(), absl::StatusCode::kInvalidArgument);
  // 4 channels' worth of bytes is refused, not read as RGB.
  std::vector<std::uint8_t> rgba(42 * 42 * 4);
  EXPECT_EQ(tower->Encode(42, 42, rgba).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(V41Tower, ShapeMismatchNamesTheTensor) {
  // A config that disagrees with the checkpoint fails at load with the tensor's name.
  const auto tmp = std::filesystem::temp_directory_path() /
                   ("vision_v41_shape_" + std::to_string(::getpid()));
  std::filesystem::create_directories(tmp);
  std::filesystem::copy_file(VisionFixtureDir("v41") + "/model.safetensors",
                             tmp / "model.safetensors");
  nlohmann::json cfg = ReadJson(VisionFixtureDir("v41") + "/config.json");
  cfg["vision_config"]["intermediate_size"] = 96;
  std::ofstream(tmp / "config.json") << cfg.dump();
  auto backend = kernels::CreateCpuBackend({.num_threads = 1});
  auto st = LoadVisionTower(tmp.string(), backend.get()).status();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("mlp.w1.weight"), std::string::npos) << st;
  cfg["vision_config"]["intermediate_size"] = 64;
  cfg["vision_config"]["num_attention_heads"] = 3;  // head_dim not a multiple of 4
  std::ofstream(tmp / "config.json", std::ios::trunc) << cfg.dump();
  EXPECT_EQ(LoadVisionTower(tmp.string(), backend.get()).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::filesystem::remove_all(tmp);
}

}  // namespace
}  // namespace tandem::model
