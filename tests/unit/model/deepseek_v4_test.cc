// DeepSeek-V4 against transformers: tests/fixtures/deepseek_v4_tiny's reference logits were
// computed by DeepseekV4ForCausalLM (tools/fixtures/make_v4_fixture.py). Relative error is per
// logits row, max|got - want| / max|want| (hf_fixture_test_util.h).
#include "tandem/model/deepseek_v4.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "checkpoint/hf_config.h"
#include "gtest/gtest.h"
#include "hf_fixture_test_util.h"
#include "rope.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/loader.h"

namespace tandem::model {
namespace {

using testing::CopyFixture;
using testing::EditSafetensorsHeader;
using testing::FixtureDir;
using testing::LoadReference;
using testing::MaxRelError;
using testing::PokeFirstFloat;
using testing::Reference;
using testing::TestKv;

constexpr char kFixture[] = "deepseek_v4_tiny";
constexpr double kTolerance = 1e-4;

class DeepseekV4Fixture : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = kernels::CreateCpuBackend({});
    LoadOptions options;
    options.check_finite = true;
    auto model = LoadModel(FixtureDir(kFixture), options, backend_.get());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    ref_ = LoadReference(kFixture);
    full_ = ref_.prompt;
    full_.insert(full_.end(), ref_.generated.begin(), ref_.generated.end());
  }

  std::vector<float> RunChunks(const std::vector<int>& sizes, TestKv* kv,
                               const std::vector<std::int32_t>& table) {
    return testing::RunChunks(*model_, full_, sizes, kv, table);
  }

  // Expected rows for positions [0, count) of full_: prompt logits, then decode logits.
  std::vector<std::vector<float>> Expected(int count) const {
    std::vector<std::vector<float>> rows(ref_.prompt_logits.begin(), ref_.prompt_logits.end());
    rows.insert(rows.end(), ref_.decode_logits.begin(), ref_.decode_logits.end());
    rows.resize(count);
    return rows;
  }

  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<Model> model_;
  Reference ref_;
  std::vector<std::int32_t> full_;
};

TEST_F(DeepseekV4Fixture, ConfigComesFromTheCheckpoint) {
  EXPECT_EQ(model_->config().arch, Architecture::kDeepseekV4);
  EXPECT_EQ(model_->config().vocab_size, 256);
  EXPECT_EQ(model_->kv_layout().num_layers, 3);
  // CSA row: K=V head (16) + compressor kv/gate (2 * 32) + entry (16) + indexer kv/gate (4 * 8)
  // + indexer entry (8).
  EXPECT_EQ(model_->kv_layout().floats_per_token, 16 + 64 + 16 + 32 + 8);
}

TEST_F(DeepseekV4Fixture, WholePromptInOneChunkMatchesTransformers) {
  TestKv kv(model_->kv_layout(), 16);
  const auto table = TestKv::Table(0, 16);
  const int n = static_cast<int>(ref_.prompt.size());
  const std::vector<float> logits = RunChunks({n}, &kv, table);
  EXPECT_LT(MaxRelError(logits, ref_.prompt_logits), kTolerance);
}

TEST_F(DeepseekV4Fixture, ChunkedPrefillAndDecodeMatchTransformers) {
  TestKv kv(model_->kv_layout(), 16);
  const auto table = TestKv::Table(0, 16);
  // Chunk edges fall inside sliding, CSA and HCA windows; then one token per step.
  std::vector<int> sizes = {3, 6, 1, 13, 17};
  for (std::size_t i = 0; i < ref_.generated.size(); ++i) sizes.push_back(1);
  const std::vector<float> logits = RunChunks(sizes, &kv, table);
  EXPECT_LT(MaxRelError(logits, Expected(static_cast<int>(full_.size()))), kTolerance);
}

TEST_F(DeepseekV4Fixture, BatchOfTwoEqualsEachAlone) {
  TestKv kv(model_->kv_layout(), 32);
  const auto table_a = TestKv::Table(0, 16), table_b = TestKv::Table(16, 16);
  const int n = static_cast<int>(ref_.prompt.size());
  std::vector<float> logits;
  SequenceChunk a, b;
  a.tokens = std::span<const std::int32_t>(full_.data(), n);
  a.block_table = table_a;
  a.logits = LogitsMode::kAll;
  b.tokens = std::span<const std::int32_t>(full_.data(), 20);  // another sequence's prefix
  b.block_table = table_b;
  b.logits = LogitsMode::kLast;
  const SequenceChunk prefill[] = {a, b};
  ASSERT_TRUE(model_->Forward(prefill, kv.storage, &logits).ok());
  ASSERT_EQ(logits.size(), static_cast<std::size_t>(n + 1) * 256);
  EXPECT_LT(MaxRelError({logits.begin(), logits.begin() + n * 256}, ref_.prompt_logits),
            kTolerance);
  EXPECT_LT(MaxRelError({logits.begin() + n * 256, logits.end()}, {ref_.prompt_logits[19]}),
            kTolerance);
  // Decode both: a continues the reference, b continues its own prefix with token full_[20].
  logits.clear();
  a.tokens = std::span<const std::int32_t>(full_.data() + n, 1);
  a.start_pos = n;
  a.logits = LogitsMode::kLast;
  b.tokens = std::span<const std::int32_t>(full_.data() + 20, 1);
  b.start_pos = 20;
  const SequenceChunk decode[] = {a, b};
  ASSERT_TRUE(model_->Forward(decode, kv.storage, &logits).ok());
  EXPECT_LT(MaxRelError({logits.begin(), logits.begin() + 256}, {ref_.decode_logits[0]}),
            kTolerance);
  EXPECT_LT(MaxRelError({logits.begin() + 256, logits.end()}, {ref_.prompt_logits[20]}),
            kTolerance);
}

TEST_F(DeepseekV4Fixture, GreedyDecodeReproducesTransformersTokens) {
  TestKv kv(model_->kv_layout(), 16);
  const auto table = TestKv::Table(0, 16);
  std::vector<std::int32_t> seq = ref_.prompt;
  std::vector<float> logits;
  SequenceChunk c;
  c.tokens = seq;
  c.block_table = table;
  ASSERT_TRUE(model_->Forward({&c, 1}, kv.storage, &logits).ok());
  for (std::size_t step = 0; step < ref_.generated.size(); ++step) {
    const auto best = std::max_element(logits.end() - 256, logits.end()) - (logits.end() - 256);
    EXPECT_EQ(best, ref_.generated[step]) << "step " << step;
    seq.push_back(static_cast<std::int32_t>(best));
    c.tokens = std::span<const std::int32_t>(&seq.back(), 1);
    c.start_pos = static_cast<int>(seq.size()) - 1;
    ASSERT_TRUE(model_->Forward({&c, 1}, kv.storage, &logits).ok());
  }
}

TEST(DeepseekV4Rope, BothRopeTablesMatchTransformers) {
  // The sliding layers use plain rope at rope_theta, the compressed ones YaRN at
  // compress_rope_theta; both on the last rope_dim channels of a head.
  auto config = internal::ReadHfConfig(FixtureDir(kFixture));
  ASSERT_TRUE(config.ok()) << config.status();
  const DeepseekV4Config& c = config->deepseek_v4;
  ASSERT_EQ(c.compress_rope_scaling.type, RopeScalingType::kYarn);
  const Reference ref = LoadReference(kFixture);
  const auto main_want = ref.raw.at("rope_inv_freq_main").get<std::vector<float>>();
  const auto compress_want = ref.raw.at("rope_inv_freq_compress").get<std::vector<float>>();
  const auto main_got = internal::ComputeRopeTables(c.rope_dim, c.rope_theta, RopeScaling{});
  const auto compress_got =
      internal::ComputeRopeTables(c.rope_dim, c.compress_rope_theta, c.compress_rope_scaling);
  ASSERT_EQ(main_got.inv_freq.size(), main_want.size());
  ASSERT_EQ(compress_got.inv_freq.size(), compress_want.size());
  for (std::size_t i = 0; i < main_want.size(); ++i) {
    EXPECT_NEAR(main_got.inv_freq[i], main_want[i], 1e-6 * main_want[i]) << i;
    EXPECT_NEAR(compress_got.inv_freq[i], compress_want[i], 1e-6 * compress_want[i]) << i;
  }
}

TEST(DeepseekV4Config, LayerScheduleAndRoutingComeFromConfig) {
  auto config = internal::ReadHfConfig(FixtureDir(kFixture));
  ASSERT_TRUE(config.ok()) << config.status();
  const DeepseekV4Config& c = config->deepseek_v4;
  EXPECT_EQ(c.attention_kinds,
            (std::vector<DeepseekV4AttentionKind>{DeepseekV4AttentionKind::kSliding,
                                                  DeepseekV4AttentionKind::kCompressedSparse,
                                                  DeepseekV4AttentionKind::kHeavilyCompressed}));
  EXPECT_EQ(c.hash_routed, (std::vector<bool>{true, false, false}));
  EXPECT_EQ(c.csa_rate, 4);
  EXPECT_EQ(c.hca_rate, 8);
  EXPECT_EQ(c.rope_dim, 8);
  EXPECT_EQ(c.sliding_window, 8);
}

// The fixture's config.json with an edit, parsed as a checkpoint's config would be.
absl::StatusOr<internal::HfConfig> ParseEdited(const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j =
      nlohmann::json::parse(testing::ReadBytes(FixtureDir(kFixture) + "/config.json"));
  edit(j);
  return internal::ParseHfConfig(j.dump(), "config.json");
}

TEST(DeepseekV4Config, LegacyCompressRatiosGiveTheSameSchedule) {
  auto config = ParseEdited([](nlohmann::json& j) {
    j.erase("layer_types");
    j["compress_ratios"] = {0, 4, 128};
  });
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->deepseek_v4.attention_kinds,
            (std::vector<DeepseekV4AttentionKind>{DeepseekV4AttentionKind::kSliding,
                                                  DeepseekV4AttentionKind::kCompressedSparse,
                                                  DeepseekV4AttentionKind::kHeavilyCompressed}));
}

TEST(DeepseekV4Config, UnknownLayerTypeIsNamed) {
  auto config = ParseEdited([](nlohmann::json& j) { j["layer_types"][1] = "full_attention"; });
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("layer_types[1]"), std::string::npos)
      << config.status();
}

TEST(DeepseekV4Config, SeveralKvHeadsAreRejected) {
  auto config = ParseEdited([](nlohmann::json& j) { j["num_key_value_heads"] = 2; });
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("num_key_value_heads"), std::string::npos)
      << config.status();
}

TEST_F(DeepseekV4Fixture, BadChunksAreErrorsNotCrashes) {
  TestKv kv(model_->kv_layout(), 4);
  const auto table = TestKv::Table(0, 2);  // 8 tokens
  std::vector<float> logits;
  const std::vector<std::int32_t> out_of_vocab = {5, 256};
  SequenceChunk c;
  c.tokens = out_of_vocab;
  c.block_table = table;
  EXPECT_FALSE(model_->Forward({&c, 1}, kv.storage, &logits).ok());
  c.tokens = std::span<const std::int32_t>(full_.data(), 9);  // past the table
  EXPECT_FALSE(model_->Forward({&c, 1}, kv.storage, &logits).ok());
  c.tokens = {};
  EXPECT_FALSE(model_->Forward({&c, 1}, kv.storage, &logits).ok());
  const std::vector<std::int32_t> foreign_block = {0, 7};
  c.tokens = std::span<const std::int32_t>(full_.data(), 8);
  c.block_table = foreign_block;
  EXPECT_FALSE(model_->Forward({&c, 1}, kv.storage, &logits).ok());
  EXPECT_TRUE(logits.empty());
}

absl::Status LoadCopy(const std::string& dir) {
  auto backend = kernels::CreateCpuBackend({});
  return LoadModel(dir, LoadOptions{}, backend.get()).status();
}

TEST(DeepseekV4Checkpoint, MissingTensorIsNamed) {
  const std::string dir = CopyFixture(kFixture, "missing");
  EditSafetensorsHeader(dir + "/model.safetensors", [](nlohmann::json& h) {
    h.erase("model.layers.1.attn.indexer.compressor.ape");
  });
  const absl::Status s = LoadCopy(dir);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("model.layers.1.attn.indexer.compressor.ape"), std::string::npos) << s;
}

TEST(DeepseekV4Checkpoint, WrongShapeIsNamed) {
  const std::string dir = CopyFixture(kFixture, "shape");
  EditSafetensorsHeader(dir + "/model.safetensors", [](nlohmann::json& h) {
    h["model.layers.2.attn.wo_a.weight"]["shape"] = {32, 16};  // same bytes, transposed
  });
  const absl::Status s = LoadCopy(dir);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("model.layers.2.attn.wo_a.weight"), std::string::npos) << s;
}

TEST(DeepseekV4Checkpoint, HashTableEntryOutOfRangeIsNamed) {
  const std::string dir = CopyFixture(kFixture, "hash");
  PokeFirstFloat(dir + "/model.safetensors", "model.layers.0.ffn.gate.tid2eid", 8.0f);
  const absl::Status s = LoadCopy(dir);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("model.layers.0.ffn.gate.tid2eid"), std::string::npos) << s;
}

}  // namespace
}  // namespace tandem::model
