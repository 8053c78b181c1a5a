#include "checkpoint/safetensors.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hf_fixture_test_util.h"

namespace tandem::model::internal {
namespace {

using tandem::model::testing::SafetensorsBytes;
using tandem::model::testing::WriteBytes;
using ::testing::HasSubstr;
using Json = nlohmann::json;

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tandem_st_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    WriteBytes(path, bytes);
    return path;
  }

  // Two tensors: "a" F32 [2, 3] holding 0..5 and "b" BF16 [4] holding 1, 2, 3, 4.
  static std::string GoodFile() {
    std::string data(24 + 8, '\0');
    for (int i = 0; i < 6; ++i) {
      const float v = static_cast<float>(i);
      std::memcpy(data.data() + 4 * i, &v, 4);
    }
    for (int i = 0; i < 4; ++i) {
      const std::uint16_t v = kernels::F32ToBf16(static_cast<float>(i + 1));
      std::memcpy(data.data() + 24 + 2 * i, &v, 2);
    }
    Json h;
    h["__metadata__"] = {{"format", "pt"}};
    h["a"] = {{"dtype", "F32"}, {"shape", {2, 3}}, {"data_offsets", {0, 24}}};
    h["b"] = {{"dtype", "BF16"}, {"shape", {4}}, {"data_offsets", {24, 32}}};
    return SafetensorsBytes(h, data);
  }

  static std::string WithEntry(const std::string& name, const Json& entry) {
    Json h;
    h[name] = entry;
    return SafetensorsBytes(h, std::string(64, '\0'));
  }

  std::filesystem::path dir_;
};

TEST_F(Safetensors, ReadsTensorsInPlace) {
  auto f = SafetensorsFile::Open(Write("good.safetensors", GoodFile()));
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->tensors().size(), 2u);
  const SafetensorsTensor& a = f->tensors().at("a");
  EXPECT_EQ(a.shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(a.view.rows, 2);
  EXPECT_EQ(a.view.cols, 3);
  EXPECT_EQ(a.view.At(1, 2), 5.0f);
  const SafetensorsTensor& b = f->tensors().at("b");
  EXPECT_EQ(b.view.dtype, kernels::DType::kBF16);
  EXPECT_EQ(b.view.rows, 1);  // 1-D tensors are one row
  EXPECT_EQ(b.view.cols, 4);
  EXPECT_EQ(b.view.At(0, 3), 4.0f);
}

TEST_F(Safetensors, StackedTensorsFlattenLeadingDimensions) {
  Json h;
  h["e"] = {{"dtype", "F32"}, {"shape", {2, 3, 4}}, {"data_offsets", {0, 96}}};
  auto f =
      SafetensorsFile::Open(Write("e.safetensors", SafetensorsBytes(h, std::string(96, '\0'))));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->tensors().at("e").view.rows, 6);
  EXPECT_EQ(f->tensors().at("e").view.cols, 4);
}

TEST_F(Safetensors, RejectsTruncatedFile) {
  std::string bytes = GoodFile();
  bytes.resize(bytes.size() - 4);
  const auto f = SafetensorsFile::Open(Write("t.safetensors", bytes));
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(f.status().message(), HasSubstr("tensor b: data_offsets [24, 32] fall outside"));
}

TEST_F(Safetensors, RejectsBadHeaderLength) {
  std::string bytes = GoodFile();
  bytes[6] = 1;  // header length now ~2^48
  EXPECT_THAT(SafetensorsFile::Open(Write("h.safetensors", bytes)).status().message(),
              HasSubstr("header length"));
  EXPECT_THAT(SafetensorsFile::Open(Write("s.safetensors", "abc")).status().message(),
              HasSubstr("too short"));
  std::string not_json = GoodFile();
  not_json[8] = 'x';
  EXPECT_THAT(SafetensorsFile::Open(Write("j.safetensors", not_json)).status().message(),
              HasSubstr("not a JSON object"));
}

TEST_F(Safetensors, RejectsOffsetsPastTheEnd) {
  const auto f = SafetensorsFile::Open(
      Write("o.safetensors",
            WithEntry("w", {{"dtype", "F32"}, {"shape", {32}}, {"data_offsets", {0, 128}}})));
  EXPECT_THAT(f.status().message(), HasSubstr("tensor w: data_offsets [0, 128] fall outside"));
}

TEST_F(Safetensors, RejectsSizeMismatch) {
  const auto f = SafetensorsFile::Open(
      Write("m.safetensors",
            WithEntry("w", {{"dtype", "F32"}, {"shape", {3}}, {"data_offsets", {0, 16}}})));
  EXPECT_THAT(f.status().message(), HasSubstr("tensor w: shape needs 12 bytes"));
}

TEST_F(Safetensors, RejectsOverlap) {
  Json h;
  h["x"] = {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}};
  h["y"] = {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {8, 24}}};
  const auto f =
      SafetensorsFile::Open(Write("v.safetensors", SafetensorsBytes(h, std::string(32, '\0'))));
  EXPECT_THAT(f.status().message(), HasSubstr("overlap"));
}

TEST_F(Safetensors, RejectsUnsupportedDtypeByName) {
  for (const std::string dtype : {"I32", "F8_E5M2", "F64"}) {
    const auto f = SafetensorsFile::Open(
        Write("d.safetensors",
              WithEntry("layer.w", {{"dtype", dtype}, {"shape", {2}}, {"data_offsets", {0, 8}}})));
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(f.status().message(), HasSubstr("tensor layer.w has dtype " + dtype));
  }
}

TEST_F(Safetensors, RejectsMalformedEntries) {
  EXPECT_THAT(
      SafetensorsFile::Open(
          Write("n.safetensors",
                WithEntry("w", {{"dtype", "F32"}, {"shape", {-1}}, {"data_offsets", {0, 4}}})))
          .status()
          .message(),
      HasSubstr("tensor w: shape"));
  EXPECT_THAT(
      SafetensorsFile::Open(
          Write("r.safetensors",
                WithEntry("w", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {8, 4}}})))
          .status()
          .message(),
      HasSubstr("tensor w: data_offsets"));
  EXPECT_THAT(SafetensorsFile::Open(Write("q.safetensors", WithEntry("w", {{"shape", {1}}})))
                  .status()
                  .message(),
              HasSubstr("tensor w: missing dtype"));
}

TEST_F(Safetensors, CheckpointReadsSingleFileOrIndex) {
  Write("model.safetensors", GoodFile());
  auto single = SafetensorsCheckpoint::Open(dir_.string());
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_TRUE(single->Contains("a"));
  EXPECT_EQ(single->Get("missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(single->Get("missing").status().message(), HasSubstr("missing tensor missing"));

  std::filesystem::remove(dir_ / "model.safetensors");
  Write("part1.safetensors", GoodFile());
  Json h;
  h["c"] = {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0, 4}}};
  Write("part2.safetensors", SafetensorsBytes(h, std::string(4, '\0')));
  Json index;
  index["weight_map"] = {
      {"a", "part1.safetensors"}, {"b", "part1.safetensors"}, {"c", "part2.safetensors"}};
  Write("model.safetensors.index.json", index.dump());
  auto sharded = SafetensorsCheckpoint::Open(dir_.string());
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  EXPECT_EQ(sharded->tensors().size(), 3u);
  EXPECT_EQ(sharded->Get("a")->At(0, 1), 1.0f);
  EXPECT_EQ(std::move(*sharded).ReleaseMappings().size(), 2u);

  index["weight_map"]["d"] = "part3.safetensors";
  Write("model.safetensors.index.json", index.dump());
  EXPECT_EQ(SafetensorsCheckpoint::Open(dir_.string()).status().code(),
            absl::StatusCode::kNotFound);
  Write("model.safetensors.index.json", "{\"weight_map\": 3}");
  EXPECT_THAT(SafetensorsCheckpoint::Open(dir_.string()).status().message(),
              HasSubstr("no weight_map"));
}

// tests/fixtures/quantized_tensors (tools/fixtures/make_quantized_fixtures.py): FP8 with
// DeepSeek's block scales and F16, read in place, must equal numpy's dequantisation bit for bit
// (DeepSeek-V3's weight_dequant: float32(fp8) * block scale, one float32 rounding).
TEST_F(Safetensors, Fp8AndF16MatchNumpyDequantisation) {
  const std::string dir = tandem::model::testing::FixtureDir("quantized_tensors");
  auto ckpt = SafetensorsCheckpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto expected = SafetensorsFile::Open(dir + "/expected.safetensors");
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_EQ(expected->tensors().size(), 3u);
  for (const auto& [name, want] : expected->tensors()) {
    SCOPED_TRACE(name);
    auto got = ckpt->Get(name);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(ckpt->Shape(name).value(), want.shape);
    ASSERT_EQ(got->rows, want.view.rows);
    ASSERT_EQ(got->cols, want.view.cols);
    int mismatches = 0;
    for (std::int64_t r = 0; r < got->rows; ++r) {
      for (std::int64_t c = 0; c < got->cols; ++c) {
        const float g = got->At(r, c), w = want.view.At(r, c);
        if (std::memcmp(&g, &w, sizeof(g)) != 0 && ++mismatches <= 5) {
          ADD_FAILURE() << "[" << r << ", " << c << "]: got " << g << ", numpy " << w;
        }
      }
    }
  }
  EXPECT_EQ(ckpt->Get("fp8.weight")->dtype, kernels::DType::kF8E4M3);
  EXPECT_EQ(ckpt->Get("f16.weight")->dtype, kernels::DType::kF16);
}

TEST_F(Safetensors, Fp8NeedsMatchingF32BlockScales) {
  auto write = [&](const Json& scale_entry) {
    Json h;
    h["w"] = {{"dtype", "F8_E4M3"}, {"shape", {20, 40}}, {"data_offsets", {16, 816}}};
    if (!scale_entry.is_null()) h["w_scale_inv"] = scale_entry;
    Write("model.safetensors", SafetensorsBytes(h, std::string(816, '\0')));
    return SafetensorsCheckpoint::Open(dir_.string(), {16, 32}).status();
  };
  // [20, 40] in 16 x 32 blocks: 2 x 2 scales.
  EXPECT_TRUE(write({{"dtype", "F32"}, {"shape", {2, 2}}, {"data_offsets", {0, 16}}}).ok());
  EXPECT_THAT(SafetensorsCheckpoint::Open(dir_.string(), {128, 128}).status().message(),
              HasSubstr("need 1 x 1"));
  EXPECT_THAT(write(Json()).message(), HasSubstr("FP8 tensor w: no block scales w_scale_inv"));
  EXPECT_THAT(write({{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}).message(),
              HasSubstr("need 2 x 2"));
  EXPECT_THAT(write({{"dtype", "BF16"}, {"shape", {2, 4}}, {"data_offsets", {0, 16}}}).message(),
              HasSubstr("is BF16, not F32"));
}

TEST_F(Safetensors, CheckpointNeedsWeights) {
  EXPECT_EQ(SafetensorsCheckpoint::Open(dir_.string()).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tandem::model::internal
