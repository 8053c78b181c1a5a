// PredominantMatrixDtype: what --bf16-matmul auto reads of a checkpoint before the backend exists.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hf_fixture_test_util.h"
#include "tandem/model/loader.h"

namespace tandem::model {
namespace {

using kernels::DType;
using testing::FixtureDir;
using ::testing::HasSubstr;
using testing::SafetensorsBytes;
using testing::WriteBytes;
using Json = nlohmann::json;

class MatrixDtype : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tandem_mdt_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "config.json") << "{}";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A shard holding one tensor of `shape` in `dtype` (zeros).
  void WriteShard(const std::string& file, const std::string& name, const std::string& dtype,
                  const std::vector<std::int64_t>& shape, int element_bytes) {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    Json h;
    h[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {0, n * element_bytes}}};
    WriteBytes((dir_ / file).string(), SafetensorsBytes(h, std::string(n * element_bytes, '\0')));
  }

  std::filesystem::path dir_;
};

TEST(MatrixDtypeFixtures, EachFixtureReportsTheDtypeOfItsMatrices) {
  EXPECT_EQ(*PredominantMatrixDtype(FixtureDir("llama_tiny")), DType::kF32);
  EXPECT_EQ(*PredominantMatrixDtype(FixtureDir("llama_tiny_f16")), DType::kF16);
  EXPECT_EQ(*PredominantMatrixDtype(FixtureDir("deepseek_v3_tiny")), DType::kF32);
  // Its router weight stays float32; the rest is bf16.
  EXPECT_EQ(*PredominantMatrixDtype(FixtureDir("deepseek_v3_tiny_bf16")), DType::kBF16);
  // Its norms, router and scales are float32; the projections FP8.
  EXPECT_EQ(*PredominantMatrixDtype(FixtureDir("deepseek_v3_tiny_fp8")), DType::kF8E4M3);
}

TEST_F(MatrixDtype, CountsElementsOfMatricesInEveryShardButNotVectors) {
  // bf16: 150 + 150 elements in two shards; float32: a 250-element matrix (1,000 bytes against
  // bf16's 600) and a 10,000-element vector, which is no matrix. Elements of matrices decide.
  WriteShard("model-00001-of-00003.safetensors", "w1", "BF16", {10, 15}, 2);
  WriteShard("model-00002-of-00003.safetensors", "w2", "BF16", {3, 5, 10}, 2);
  WriteShard("model-00003-of-00003.safetensors", "w3", "F32", {25, 10}, 4);
  WriteShard("norms.safetensors", "norm", "F32", {10000}, 4);
  EXPECT_EQ(*PredominantMatrixDtype(dir_.string()), DType::kBF16);

  WriteShard("model-00003-of-00003.safetensors", "w3", "F32", {35, 10}, 4);
  EXPECT_EQ(*PredominantMatrixDtype(dir_.string()), DType::kF32);
}

TEST_F(MatrixDtype, ALlama2cFileIsFloat32) {
  const std::string file = (dir_ / "model.bin").string();
  WriteBytes(file, std::string(64, '\0'));
  EXPECT_EQ(*PredominantMatrixDtype(file), DType::kF32);
}

TEST_F(MatrixDtype, ABrokenShardOrNoShardIsAnError) {
  absl::StatusOr<DType> none = PredominantMatrixDtype(dir_.string());
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("no matrix"));

  WriteShard("model.safetensors", "w", "BF16", {4, 4}, 2);
  WriteBytes((dir_ / "extra.safetensors").string(), std::string(5, 'x'));
  absl::StatusOr<DType> broken = PredominantMatrixDtype(dir_.string());
  ASSERT_FALSE(broken.ok());
  EXPECT_THAT(broken.status().message(), HasSubstr("extra.safetensors"));
}

}  // namespace
}  // namespace tandem::model
