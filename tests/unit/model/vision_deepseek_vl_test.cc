// The DeepSeek-VL tower (SigLIP + aligner) against transformers' DeepseekVLModel on the tiny
// random-weight fixture of tools/fixtures/make_vision_fixtures.py.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/vision.h"
#include "vision_test_util.h"

namespace tandem::model {
namespace {

using testing::LoadExpected;
using testing::PatternImage;
using testing::VisionFixtureDir;
using testing::WorstRowRelError;

class DeepseekVlTowerTest : public ::testing::TestWithParam<bool> {
 protected:
  std::unique_ptr<kernels::Backend> MakeBackend() {
    return GetParam() ? kernels::CreateCpuBackend({.num_threads = 2})
                      : kernels::CreateReferenceCpuBackend();
  }
};

TEST_P(DeepseekVlTowerTest, MatchesTransformers) {
  // deepseek_vl_bf16: the same model with BF16 weights, read in place.
  for (const char* fixture : {"deepseek_vl", "deepseek_vl_bf16"}) {
    SCOPED_TRACE(fixture);
    const std::string dir = VisionFixtureDir(fixture);
    auto backend = MakeBackend();
    auto tower = LoadVisionTower(dir, backend.get());
    ASSERT_TRUE(tower.ok()) << tower.status();
    EXPECT_EQ((*tower)->kind(), "deepseek_vl");
    EXPECT_EQ((*tower)->hidden_size(), 48);
    const auto expected = LoadExpected(dir);
    ASSERT_FALSE(expected.empty());
    for (const auto& e : expected) {
      auto rows = (*tower)->OutputRows(e.width, e.height);
      ASSERT_TRUE(rows.ok()) << rows.status();
      EXPECT_EQ(*rows, e.rows);
      auto out = (*tower)->Encode(e.width, e.height, PatternImage(e.width, e.height, e.seed));
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ(out->size(), e.values.size());
      const double err = WorstRowRelError(*out, e.values, e.cols);
      EXPECT_LT(err, 1e-4) << e.name;
      std::printf("%s %s: worst row relative error %.3g\n", fixture, e.name.c_str(), err);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DeepseekVlTowerTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Fast" : "Reference"; });

TEST(DeepseekVlTower, DifferentImagesGiveDifferentRows) {
  // Guards against a tower that ignores its pixels (e.g. a broken patch extraction) and still
  // passes on a fixture whose outputs happened to be dominated by biases.
  auto backend = kernels::CreateCpuBackend({.num_threads = 1});
  auto tower = LoadVisionTower(VisionFixtureDir("deepseek_vl"), backend.get());
  ASSERT_TRUE(tower.ok()) << tower.status();
  auto a = (*tower)->Encode(64, 64, PatternImage(64, 64, 0));
  auto b = (*tower)->Encode(64, 64, PatternImage(64, 64, 1));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GT(WorstRowRelError(*a, *b, 48), 1e-2);
}

TEST(DeepseekVlTower, RefusesOtherSizesAndShortBuffers) {
  auto backend = kernels::CreateCpuBackend({.num_threads = 1});
  auto tower = LoadVisionTower(VisionFixtureDir("deepseek_vl"), backend.get());
  ASSERT_TRUE(tower.ok()) << tower.status();
  EXPECT_EQ((*tower)->OutputRows(64, 48).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*tower)->Encode(48, 64, PatternImage(48, 64, 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<std::uint8_t> short_buf(64 * 64 * 3 - 1);
  auto st = (*tower)->Encode(64, 64, short_buf).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("RGB8"), std::string::npos) << st;
  EXPECT_EQ((*tower)->Encode(0, 64, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*tower)->Encode(-64, -64, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DeepseekVlTower, FingerprintIsStableAndTracksWeights) {
  auto backend = kernels::CreateCpuBackend({.num_threads = 1});
  const std::string dir = VisionFixtureDir("deepseek_vl");
  auto a = LoadVisionTower(dir, backend.get());
  auto b = LoadVisionTower(dir, backend.get());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)->fingerprint().size(), 32u);
  EXPECT_EQ((*a)->fingerprint(), (*b)->fingerprint());
  // One changed weight byte gives another fingerprint.
  const auto tmp = std::filesystem::temp_directory_path() /
                   ("vision_fp_" + std::to_string(::getpid()));
  std::filesystem::create_directories(tmp);
  for (const char* f : {"config.json", "preprocessor_config.json", "model.safetensors"}) {
    std::filesystem::copy_file(dir + "/" + f, tmp / f,
                               std::filesystem::copy_options::overwrite_existing);
  }
  {
    std::fstream st(tmp / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    st.seekg(-5, std::ios::end);  // inside the last tensor's data
    char c = 0;
    st.read(&c, 1);
    st.seekp(-5, std::ios::end);
    c = static_cast<char>(c ^ 0x01);
    st.write(&c, 1);
  }
  auto changed = LoadVisionTower(tmp.string(), backend.get());
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_NE((*changed)->fingerprint(), (*a)->fingerprint());
  std::filesystem::remove_all(tmp);
}

TEST(VisionLoader, RefusesUnknownModelTypeAndMissingDirectory) {
  auto backend = kernels::CreateCpuBackend({.num_threads = 1});
  EXPECT_FALSE(LoadVisionTower("/nonexistent/vision", backend.get()).ok());
  const auto tmp = std::filesystem::temp_directory_path() /
                   ("vision_type_" + std::to_string(::getpid()));
  std::filesystem::create_directories(tmp);
  std::ofstream(tmp / "config.json") << R"({"model_type": "llama"})";
  auto st = LoadVisionTower(tmp.string(), backend.get()).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("llama"), std::string::npos) << st;
  std::filesystem::remove_all(tmp);
}

}  // namespace
}  // namespace tandem::model
