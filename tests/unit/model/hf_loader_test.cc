// Loading Hugging Face checkpoints: the Llama fixture against transformers, and every kind of bad
// checkpoint failing with an error that names the culprit.
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hf_fixture_test_util.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/deepseek_v3.h"
#include "tandem/model/loader.h"

namespace tandem::model {
namespace {

using testing::CopyFixture;
using testing::EditSafetensorsHeader;
using testing::FixtureDir;
using ::testing::HasSubstr;
using testing::LoadReference;
using testing::MaxRelError;
using testing::PokeFirstFloat;
using testing::ReadBytes;
using testing::TestKv;
using testing::WriteBytes;

class HfLoader : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const auto& d : dirs_) std::filesystem::remove_all(d);
  }
  std::string Copy(const std::string& fixture) {
    dirs_.push_back(
        CopyFixture(fixture, ::testing::UnitTest::GetInstance()->current_test_info()->name()));
    return dirs_.back();
  }
  absl::Status Load(const std::string& dir, bool check_finite = false) {
    LoadOptions options;
    options.check_finite = check_finite;
    return LoadModel(dir, options, backend_.get()).status();
  }

  std::unique_ptr<kernels::Backend> backend_ = kernels::CreateCpuBackend({});
  std::vector<std::string> dirs_;
};

TEST_F(HfLoader, LlamaMatchesTransformers) {
  auto model = LoadModel(FixtureDir("llama_tiny"), {}, backend_.get());
  ASSERT_TRUE(model.ok()) << model.status();
  const auto ref = LoadReference("llama_tiny");
  EXPECT_EQ((*model)->config().arch, Architecture::kLlama);
  EXPECT_EQ((*model)->config().name, "llama_tiny");
  TestKv kv((*model)->kv_layout(), 8);
  const auto table = TestKv::Table(0, 8);
  std::vector<float> logits;
  SequenceChunk c;
  c.tokens = ref.prompt;
  c.block_table = table;
  c.logits = LogitsMode::kAll;
  ASSERT_TRUE((*model)->Forward({&c, 1}, kv.storage, &logits).ok());
  std::vector<std::vector<float>> want = ref.prompt_logits;
  for (std::size_t i = 0; i + 1 < ref.generated.size(); ++i) {
    c.tokens = std::span(ref.generated).subspan(i, 1);
    c.start_pos = static_cast<int>(ref.prompt.size() + i);
    ASSERT_TRUE((*model)->Forward({&c, 1}, kv.storage, &logits).ok());
    want.push_back(ref.decode_logits[i]);
  }
  EXPECT_LT(MaxRelError(logits, want), 1e-4);
}

TEST_F(HfLoader, DeepseekConfigIsReadFromTheCheckpoint) {
  LoadOptions options;
  options.served_name = "tiny";
  auto model = LoadModel(FixtureDir("deepseek_v3_tiny") + "/", options, backend_.get());
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.arch, Architecture::kDeepseekV3);
  EXPECT_EQ(c.name, "tiny");
  EXPECT_EQ(c.vocab_size, 256);
  EXPECT_EQ(c.num_layers, 3);
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_EQ(c.eos_token_id, 1);
}

TEST_F(HfLoader, MissingTensorIsNamed) {
  const std::string dir = Copy("deepseek_v3_tiny");
  EditSafetensorsHeader(dir + "/model.safetensors", [](nlohmann::json& h) {
    h.erase("model.layers.1.self_attn.kv_b_proj.weight");
  });
  const absl::Status s = Load(dir);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("model.layers.1.self_attn.kv_b_proj.weight"));
}

TEST_F(HfLoader, MissingExpertIsNamed) {
  const std::string dir = Copy("deepseek_v3_tiny");
  EditSafetensorsHeader(dir + "/model.safetensors", [](nlohmann::json& h) {
    h.erase("model.layers.2.mlp.experts.5.down_proj.weight");
  });
  EXPECT_THAT(Load(dir).message(), HasSubstr("model.layers.2.mlp.experts.5.down_proj.weight"));
}

TEST_F(HfLoader, UntiedHeadMustBePresent) {
  const std::string dir = Copy("deepseek_v3_tiny");
  EditSafetensorsHeader(dir + "/model.safetensors",
                        [](nlohmann::json& h) { h.erase("lm_head.weight"); });
  EXPECT_THAT(Load(dir).message(), HasSubstr("lm_head.weight"));
}

TEST_F(HfLoader, ShapeMismatchIsNamed) {
  const std::string dir = Copy("deepseek_v3_tiny");
  EditSafetensorsHeader(dir + "/model.safetensors", [](nlohmann::json& h) {
    auto& shape = h["model.layers.0.self_attn.o_proj.weight"]["shape"];
    std::swap(shape[0], shape[1]);
  });
  const absl::Status s = Load(dir);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("model.layers.0.self_attn.o_proj.weight: expected [64, 48]"));
}

TEST_F(HfLoader, FusedExpertShapeMismatchIsNamed) {
  // This fixture stores experts fused, as transformers 5 saves them.
  const std::string dir = Copy("deepseek_v3_tiny_noqlora");
  const std::string tensor = "model.layers.2.mlp.experts.down_proj";
  const auto index = nlohmann::json::parse(ReadBytes(dir + "/model.safetensors.index.json"));
  const std::string shard = index["weight_map"][tensor].get<std::string>();
  EditSafetensorsHeader(dir + "/" + shard, [&](nlohmann::json& h) {
    auto& shape = h[tensor]["shape"];
    std::swap(shape[1], shape[2]);
  });
  EXPECT_THAT(Load(dir).message(), HasSubstr(tensor + ": expected [8, 64, 32]"));
}

TEST_F(HfLoader, UnsupportedDtypeIsNamed) {
  for (const std::string dtype : {"I32", "F8_E5M2"}) {
    const std::string dir = Copy("deepseek_v3_tiny");
    EditSafetensorsHeader(dir + "/model.safetensors",
                          [&](nlohmann::json& h) { h["model.norm.weight"]["dtype"] = dtype; });
    const absl::Status s = Load(dir);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("model.norm.weight has dtype " + dtype));
    std::filesystem::remove_all(dir);
    dirs_.pop_back();
  }
}

TEST_F(HfLoader, NonFiniteWeightFailsOnlyWithCheckFinite) {
  const std::string dir = Copy("deepseek_v3_tiny");
  PokeFirstFloat(dir + "/model.safetensors", "model.layers.2.mlp.experts.3.up_proj.weight",
                 std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(Load(dir, /*check_finite=*/false).ok());
  const absl::Status s = Load(dir, /*check_finite=*/true);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("model.layers.2.mlp.experts.3.up_proj.weight"));
}

TEST_F(HfLoader, UnknownArchitectureIsNamed) {
  const std::string dir = Copy("llama_tiny");
  auto config = nlohmann::json::parse(ReadBytes(dir + "/config.json"));
  config["architectures"] = {"MistralForCausalLM"};
  WriteBytes(dir + "/config.json", config.dump());
  const absl::Status s = Load(dir);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("unsupported architecture MistralForCausalLM"));
}

TEST_F(HfLoader, ShardListedInIndexMustHoldTheTensor) {
  const std::string dir = Copy("deepseek_v3_tiny_noqlora");
  auto index = nlohmann::json::parse(ReadBytes(dir + "/model.safetensors.index.json"));
  std::string& shard = index["weight_map"]["model.norm.weight"].get_ref<std::string&>();
  shard = shard == "model-00001-of-00002.safetensors" ? "model-00002-of-00002.safetensors"
                                                      : "model-00001-of-00002.safetensors";
  WriteBytes(dir + "/model.safetensors.index.json", index.dump());
  const absl::Status s = Load(dir);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("model.norm.weight"));
}

TEST_F(HfLoader, IndexCannotPointOutsideTheDirectory) {
  const std::string dir = Copy("deepseek_v3_tiny_noqlora");
  auto index = nlohmann::json::parse(ReadBytes(dir + "/model.safetensors.index.json"));
  index["weight_map"]["model.norm.weight"] = "../elsewhere.safetensors";
  WriteBytes(dir + "/model.safetensors.index.json", index.dump());
  EXPECT_THAT(Load(dir).message(), HasSubstr("invalid shard"));
}

TEST_F(HfLoader, MtpIsOptional) {
  // Converted checkpoints often drop layer num_hidden_layers; the model then has no MTP.
  const std::string dir = Copy("deepseek_v3_tiny");
  EditSafetensorsHeader(dir + "/model.safetensors", [](nlohmann::json& h) {
    for (auto it = h.begin(); it != h.end();) {
      it = it.key().rfind("model.layers.3.", 0) == 0 ? h.erase(it) : std::next(it);
    }
  });
  LoadOptions options;
  auto model = LoadModel(dir, options, backend_.get());
  ASSERT_TRUE(model.ok()) << model.status();
  auto* ds = dynamic_cast<DeepseekV3Model*>(model->get());
  ASSERT_NE(ds, nullptr);
  EXPECT_FALSE(ds->has_mtp());
}

TEST_F(HfLoader, PartialMtpLayerIsAnError) {
  const std::string dir = Copy("deepseek_v3_tiny");
  EditSafetensorsHeader(dir + "/model.safetensors",
                        [](nlohmann::json& h) { h.erase("model.layers.3.hnorm.weight"); });
  EXPECT_THAT(Load(dir).message(), HasSubstr("model.layers.3.hnorm.weight"));
}

}  // namespace
}  // namespace tandem::model
