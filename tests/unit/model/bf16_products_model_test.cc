// A bf16 Llama and a bf16 DeepSeek-V3 on the CPU backend's bf16 products
// (CpuBackendOptions::bf16_matmul = kAmx or kAvx512Bf16, where both forwards also fuse their
// gate/up pairs and stack the matrices that share an input): the engine's invariants hold bit for
// bit (chunked
// prefill, token-by-token decode and batching never change a sequence's logits), and the logits
// stay within bf16 rounding of the float32-activation path. The checkpoints are llama_tiny's and
// deepseek_v3_tiny's weights rounded to bf16 (odd sizes: hidden 64, intermediate 112 or 96, so the
// MatMul's partial tiles are on the path). Each engine skips on CPUs without its instructions.
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "hf_fixture_test_util.h"
#include "tandem/kernels/backend.h"
#include "tandem/kernels/dtype.h"
#include "tandem/model/loader.h"

namespace tandem::model {
namespace {

using testing::FixtureDir;
using testing::TestKv;
using Json = nlohmann::json;

// A fixture with every F32 tensor rounded to BF16 (nearest even), in a temp directory.
std::string WriteBf16Twin(const std::string& fixture) {
  namespace fs = std::filesystem;
  const std::string src = FixtureDir(fixture);
  const fs::path dst = fs::temp_directory_path() /
                       ("tandem_bf16_twin_" + fixture + "_" + std::to_string(::getpid()));
  fs::remove_all(dst);
  fs::create_directories(dst);
  Json config = Json::parse(testing::ReadBytes(src + "/config.json"));
  config["dtype"] = "bfloat16";
  testing::WriteBytes((dst / "config.json").string(), config.dump(2));
  const testing::SafetensorsParts parts =
      testing::SplitSafetensors(testing::ReadBytes(src + "/model.safetensors"));
  Json header;
  std::string data;
  for (const auto& [name, t] : parts.header.items()) {
    if (name == "__metadata__") continue;
    EXPECT_EQ(t.at("dtype"), "F32") << name;
    const std::size_t begin = t.at("data_offsets")[0].get<std::size_t>();
    const std::size_t end = t.at("data_offsets")[1].get<std::size_t>();
    const std::size_t out_begin = data.size();
    for (std::size_t at = begin; at < end; at += sizeof(float)) {
      float v;
      std::memcpy(&v, parts.data.data() + at, sizeof(v));
      const std::uint16_t b = kernels::F32ToBf16(v);
      data.append(reinterpret_cast<const char*>(&b), sizeof(b));
    }
    header[name] = {{"dtype", "BF16"}, {"shape", t.at("shape")},
                    {"data_offsets", {out_begin, data.size()}}};
  }
  testing::WriteBytes((dst / "model.safetensors").string(),
                      testing::SafetensorsBytes(header, data));
  return dst.string();
}

// A whole prompt from position 0, every position's logits.
SequenceChunk WholePrompt(std::span<const std::int32_t> tokens,
                          std::span<const std::int32_t> table) {
  SequenceChunk c;
  c.tokens = tokens;
  c.block_table = table;
  c.logits = LogitsMode::kAll;
  return c;
}

// (fixture, engine of the bf16 products)
class Bf16ProductsModel
    : public ::testing::TestWithParam<std::tuple<const char*, kernels::Bf16MatMul>> {
 protected:
  void SetUp() override {
    const kernels::Bf16MatMul mode = std::get<1>(GetParam());
    if (!(mode == kernels::Bf16MatMul::kAmx ? kernels::IsAmxBf16Available()
                                            : kernels::IsAvx512Bf16Available())) {
      GTEST_SKIP() << "this CPU (or OS) does not run " << kernels::Bf16MatMulName(mode)
                   << ", or the build has no AVX-512 kernels";
    }
    dir_ = WriteBf16Twin(std::get<0>(GetParam()));
    amx_backend_ = kernels::CreateCpuBackend({.num_threads = 2, .bf16_matmul = mode});
    f32_backend_ = kernels::CreateCpuBackend({.num_threads = 2});
    amx_ = Load(amx_backend_.get());
    f32_ = Load(f32_backend_.get());
    ASSERT_TRUE(amx_ && f32_);
    vocab_ = amx_->config().vocab_size;
    prompt_ = testing::LoadReference(std::get<0>(GetParam())).prompt;
    for (int i = 0; prompt_.size() < 40; ++i) prompt_.push_back(3 + (i * 37) % (vocab_ - 3));
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<Model> Load(kernels::Backend* backend) {
    auto model = LoadModel(dir_, {}, backend);
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? std::move(*model) : nullptr;
  }

  std::vector<float> Run(Model& model, const std::vector<int>& sizes) {
    TestKv kv(model.kv_layout(), 16);
    return testing::RunChunks(model, prompt_, sizes, &kv, TestKv::Table(0, 16));
  }

  std::string dir_;
  std::unique_ptr<kernels::Backend> amx_backend_, f32_backend_;
  std::unique_ptr<Model> amx_, f32_;
  int vocab_ = 0;
  std::vector<std::int32_t> prompt_;
};

TEST_P(Bf16ProductsModel, ChunkedPrefillAndDecodeKeepEveryBit) {
  ASSERT_EQ(amx_backend_->name(),
            "cpu-avx512-" + std::string(kernels::Bf16MatMulName(std::get<1>(GetParam()))));
  const int n = static_cast<int>(prompt_.size());
  const std::vector<float> whole = Run(*amx_, {n});
  ASSERT_EQ(whole.size(), static_cast<std::size_t>(n) * vocab_);
  EXPECT_EQ(Run(*amx_, {7, 13, 1, n - 21}), whole);
  EXPECT_EQ(Run(*amx_, std::vector<int>(n, 1)), whole);
}

TEST_P(Bf16ProductsModel, BatchedSequencesMatchEachRunAlone) {
  const std::vector<std::int32_t> other(prompt_.rbegin(), prompt_.rbegin() + 23);
  auto alone = [&](const std::vector<std::int32_t>& tokens) {
    TestKv kv(amx_->kv_layout(), 16);
    const std::vector<std::int32_t> table = TestKv::Table(0, 16);
    const SequenceChunk c = WholePrompt(tokens, table);
    std::vector<float> logits;
    const absl::Status s = amx_->Forward({&c, 1}, kv.storage, &logits);
    EXPECT_TRUE(s.ok()) << s;
    return logits;
  };
  std::vector<float> expected = alone(prompt_);
  const std::vector<float> second = alone(other);
  expected.insert(expected.end(), second.begin(), second.end());

  TestKv kv(amx_->kv_layout(), 32);
  const std::vector<std::int32_t> table_a = TestKv::Table(0, 16), table_b = TestKv::Table(16, 16);
  const std::vector<SequenceChunk> batch = {WholePrompt(prompt_, table_a),
                                            WholePrompt(other, table_b)};
  std::vector<float> logits;
  ASSERT_TRUE(amx_->Forward(batch, kv.storage, &logits).ok());
  EXPECT_EQ(logits, expected);
}

// bf16 activations move the logits by bf16 rounding, not more; and they do move them (the mode is
// in effect). Bound: the error measured on this fixture (7.6e-3 of the row's largest logit) with
// headroom.
TEST_P(Bf16ProductsModel, WithinBf16RoundingOfFloat32Activations) {
  const int n = static_cast<int>(prompt_.size());
  const std::vector<float> amx = Run(*amx_, {n});
  const std::vector<float> f32 = Run(*f32_, {n});
  ASSERT_EQ(amx.size(), f32.size());
  EXPECT_NE(amx, f32);
  double worst = 0.0;
  for (int r = 0; r < n; ++r) {
    const std::vector<float> want(f32.begin() + r * vocab_, f32.begin() + (r + 1) * vocab_);
    worst = std::max(worst, testing::RowRelError(amx.data() + r * vocab_, want));
  }
  std::cout << "bf16-activation logits vs float32 activations: max row relative error " << worst
            << "\n";
  EXPECT_LT(worst, 2e-2);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Bf16ProductsModel,
                         ::testing::Combine(::testing::Values("llama_tiny", "deepseek_v3_tiny"),
                                            ::testing::Values(kernels::Bf16MatMul::kAmx,
                                                              kernels::Bf16MatMul::kAvx512Bf16)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_" +
                                  std::string(kernels::Bf16MatMulName(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace tandem::model
