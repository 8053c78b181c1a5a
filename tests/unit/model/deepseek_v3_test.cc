// DeepSeek-V3 against transformers: the fixtures' reference logits were computed by
// DeepseekV3ForCausalLM (tools/fixtures/make_hf_fixtures.py). Relative error is per logits row,
// max|got - want| / max|want| (hf_fixture_test_util.h).
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "hf_fixture_test_util.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/deepseek_v3.h"
#include "tandem/model/loader.h"

namespace tandem::model {
namespace {

using testing::FixtureDir;
using testing::LoadReference;
using testing::MaxRelError;
using testing::Reference;
using testing::TestKv;

struct Case {
  std::string fixture;
  double tolerance;
  bool absorbed;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return info.param.fixture + (info.param.absorbed ? "_absorbed" : "_naive");
}

std::unique_ptr<DeepseekV3Model> Load(const std::string& fixture, bool absorbed,
                                      kernels::Backend* backend) {
  LoadOptions options;
  options.mla_absorbed = absorbed;
  options.check_finite = true;
  auto model = LoadModel(FixtureDir(fixture), options, backend);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return nullptr;
  auto* ds = dynamic_cast<DeepseekV3Model*>(model->get());
  EXPECT_NE(ds, nullptr);
  model->release();
  return std::unique_ptr<DeepseekV3Model>(ds);
}

class DeepseekV3Fixture : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    backend_ = kernels::CreateCpuBackend({});
    model_ = Load(GetParam().fixture, GetParam().absorbed, backend_.get());
    ASSERT_NE(model_, nullptr);
    ref_ = LoadReference(GetParam().fixture);
    full_ = ref_.prompt;
    full_.insert(full_.end(), ref_.generated.begin(), ref_.generated.end());
  }

  std::vector<float> RunChunks(const std::vector<int>& sizes, TestKv* kv,
                               const std::vector<std::int32_t>& table) {
    return testing::RunChunks(*model_, full_, sizes, kv, table);
  }

  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<DeepseekV3Model> model_;
  Reference ref_;
  std::vector<std::int32_t> full_;
};

TEST_P(DeepseekV3Fixture, CacheLayoutIsLatentPlusRopeKey) {
  const DeepseekV3Config& c = model_->deepseek_config();
  EXPECT_EQ(model_->kv_layout().floats_per_token, c.kv_lora_rank + c.qk_rope_head_dim);
  EXPECT_EQ(model_->kv_layout().num_layers, c.base.num_layers);
}

TEST_P(DeepseekV3Fixture, OneChunkPrefillThenDecodeMatchesTransformers) {
  TestKv kv(model_->kv_layout(), 8);
  const auto table = TestKv::Table(0, 8);
  // Prompt in one chunk, then every generated token as its own decode step.
  std::vector<int> sizes = {static_cast<int>(ref_.prompt.size())};
  sizes.insert(sizes.end(), ref_.generated.size() - 1, 1);
  const std::vector<float> logits = RunChunks(sizes, &kv, table);
  // Positions [0, len(prompt)) plus the decode steps that consumed generated[0..n-2]; the last
  // reference decode row belongs to generated[n-1], which this run does not feed.
  const std::size_t rows = ref_.prompt.size() + ref_.generated.size() - 1;
  std::vector<std::vector<float>> want = ref_.prompt_logits;
  for (std::size_t i = 0; i + 1 < ref_.generated.size(); ++i) want.push_back(ref_.decode_logits[i]);
  ASSERT_EQ(want.size(), rows);
  EXPECT_LT(MaxRelError(logits, want), GetParam().tolerance);
}

TEST_P(DeepseekV3Fixture, ChunkedPrefillMatchesTransformers) {
  TestKv kv(model_->kv_layout(), 8);
  const auto table = TestKv::Table(0, 8);
  const std::vector<float> logits = RunChunks({4, 3, 3, 1, 2}, &kv, table);
  std::vector<std::vector<float>> want = ref_.prompt_logits;
  for (std::size_t i = 0; want.size() < 13; ++i) want.push_back(ref_.decode_logits[i]);
  EXPECT_LT(MaxRelError(logits, want), GetParam().tolerance);
}

TEST_P(DeepseekV3Fixture, TokenByTokenMatchesTransformers) {
  TestKv kv(model_->kv_layout(), 8);
  const auto table = TestKv::Table(0, 8);
  const std::vector<float> logits = RunChunks(std::vector<int>(ref_.prompt.size(), 1), &kv, table);
  EXPECT_LT(MaxRelError(logits, ref_.prompt_logits), GetParam().tolerance);
}

TEST_P(DeepseekV3Fixture, LastModeReturnsTheLastRowOnly) {
  TestKv kv(model_->kv_layout(), 8);
  const auto table = TestKv::Table(0, 8);
  SequenceChunk c;
  c.tokens = ref_.prompt;
  c.block_table = table;
  c.logits = LogitsMode::kLast;
  std::vector<float> logits;
  ASSERT_TRUE(model_->Forward({&c, 1}, kv.storage, &logits).ok());
  EXPECT_LT(MaxRelError(logits, {ref_.prompt_logits.back()}), GetParam().tolerance);
}

TEST_P(DeepseekV3Fixture, BatchedSequencesMatchThemselvesAlone) {
  // Sequence A: the prompt; sequence B: other tokens, decoding while A prefills.
  const std::vector<std::int32_t> b_tokens = {5, 99, 42, 7, 200, 13};
  auto run_alone = [&](std::span<const std::int32_t> prefix, std::span<const std::int32_t> next,
                       std::vector<float>* out) {
    TestKv kv(model_->kv_layout(), 8);
    const auto table = TestKv::Table(0, 8);
    SequenceChunk c;
    c.tokens = prefix;
    c.block_table = table;
    c.logits = LogitsMode::kNone;
    std::vector<float> ignored;
    if (!prefix.empty()) {
      ASSERT_TRUE(model_->Forward({&c, 1}, kv.storage, &ignored).ok());
    }
    c.tokens = next;
    c.start_pos = static_cast<int>(prefix.size());
    c.logits = LogitsMode::kAll;
    ASSERT_TRUE(model_->Forward({&c, 1}, kv.storage, out).ok());
  };
  std::vector<float> a_alone, b_alone;
  run_alone({}, ref_.prompt, &a_alone);
  run_alone(std::span(b_tokens).first(5), std::span(b_tokens).subspan(5), &b_alone);

  TestKv kv(model_->kv_layout(), 16);
  const auto table_a = TestKv::Table(0, 8);
  const auto table_b = TestKv::Table(8, 8);
  SequenceChunk b_prefill;
  b_prefill.tokens = std::span(b_tokens).first(5);
  b_prefill.block_table = table_b;
  b_prefill.logits = LogitsMode::kNone;
  std::vector<float> ignored;
  ASSERT_TRUE(model_->Forward({&b_prefill, 1}, kv.storage, &ignored).ok());
  SequenceChunk batch[2];
  batch[0].tokens = ref_.prompt;
  batch[0].block_table = table_a;
  batch[0].logits = LogitsMode::kAll;
  batch[1].tokens = std::span(b_tokens).subspan(5);
  batch[1].start_pos = 5;
  batch[1].block_table = table_b;
  batch[1].logits = LogitsMode::kAll;
  std::vector<float> together;
  ASSERT_TRUE(model_->Forward(batch, kv.storage, &together).ok());
  std::vector<float> expected = a_alone;
  expected.insert(expected.end(), b_alone.begin(), b_alone.end());
  EXPECT_EQ(together, expected);  // bit-identical: the batch-invariance contract
  EXPECT_LT(MaxRelError(a_alone, ref_.prompt_logits), GetParam().tolerance);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DeepseekV3Fixture,
                         ::testing::Values(Case{"deepseek_v3_tiny", 1e-4, true},
                                           Case{"deepseek_v3_tiny", 1e-4, false},
                                           Case{"deepseek_v3_tiny_noqlora", 1e-4, true},
                                           Case{"deepseek_v3_tiny_noqlora", 1e-4, false},
                                           Case{"deepseek_v3_tiny_bf16", 2e-2, true},
                                           Case{"deepseek_v3_tiny_bf16", 2e-2, false}),
                         CaseName);

TEST(DeepseekV3, AbsorbedAndNaiveAttentionAgree) {
  auto backend = kernels::CreateCpuBackend({});
  for (const std::string fixture : {"deepseek_v3_tiny", "deepseek_v3_tiny_noqlora"}) {
    std::vector<float> out[2];
    for (int absorbed = 0; absorbed < 2; ++absorbed) {
      auto model = Load(fixture, absorbed == 1, backend.get());
      ASSERT_NE(model, nullptr);
      const Reference ref = LoadReference(fixture);
      TestKv kv(model->kv_layout(), 8);
      const auto table = TestKv::Table(0, 8);
      SequenceChunk c;
      c.tokens = ref.prompt;
      c.block_table = table;
      c.logits = LogitsMode::kAll;
      ASSERT_TRUE(model->Forward({&c, 1}, kv.storage, &out[absorbed]).ok());
    }
    ASSERT_EQ(out[0].size(), out[1].size());
    double diff = 0.0, scale = 0.0;
    for (std::size_t i = 0; i < out[0].size(); ++i) {
      diff = std::max(diff, static_cast<double>(std::abs(out[0][i] - out[1][i])));
      scale = std::max(scale, static_cast<double>(std::abs(out[0][i])));
    }
    EXPECT_LT(diff / scale, 1e-5) << fixture;
  }
}

// transformers' MtpLayer (fed as its MTP candidate generator feeds it) is the reference; the
// draft for row i pairs the main model's hidden state at position i with token i + 1.
TEST(DeepseekV3, MtpMatchesTransformersMtpLayer) {
  auto backend = kernels::CreateCpuBackend({});
  for (bool absorbed : {true, false}) {
    auto model = Load("deepseek_v3_tiny", absorbed, backend.get());
    ASSERT_NE(model, nullptr);
    ASSERT_TRUE(model->has_mtp());
    const Reference ref = LoadReference("deepseek_v3_tiny");
    const auto next = ref.raw.at("mtp_next_ids").get<std::vector<std::int32_t>>();
    const auto want = ref.raw.at("mtp_logits").get<std::vector<std::vector<float>>>();
    TestKv kv(model->kv_layout(), 8);
    const auto table = TestKv::Table(0, 8);
    SequenceChunk c;
    c.tokens = ref.prompt;
    c.block_table = table;
    c.logits = LogitsMode::kAll;
    std::vector<float> logits, hidden;
    ASSERT_TRUE(model->ForwardWithHidden({&c, 1}, kv.storage, &logits, &hidden).ok());
    const int h = model->config().hidden_size;
    ASSERT_EQ(hidden.size(), ref.prompt.size() * h);

    // Whole prompt at once, then the same rows in two chunks against a fresh MTP cache.
    for (const std::vector<int>& sizes : {std::vector<int>{9}, std::vector<int>{5, 4}}) {
      TestKv mtp_kv(model->mtp_kv_layout(), 8);
      std::vector<float> draft;
      int pos = 0;
      for (int n : sizes) {
        MtpChunk m;
        m.hidden = std::span<const float>(hidden.data() + pos * h, static_cast<std::size_t>(n) * h);
        m.tokens = std::span<const std::int32_t>(next.data() + pos, n);
        m.start_pos = pos;
        m.block_table = table;
        m.logits = LogitsMode::kAll;
        const absl::Status s = model->ForwardMtp({&m, 1}, mtp_kv.storage, &draft);
        ASSERT_TRUE(s.ok()) << s;
        pos += n;
      }
      EXPECT_LT(MaxRelError(draft, want), 1e-4)
          << "absorbed=" << absorbed << " chunks=" << sizes.size();
    }
  }
}

TEST(DeepseekV3, NoMtpWhenTheConfigHasNone) {
  auto backend = kernels::CreateCpuBackend({});
  auto model = Load("deepseek_v3_tiny_noqlora", true, backend.get());
  ASSERT_NE(model, nullptr);
  EXPECT_FALSE(model->has_mtp());
  std::vector<float> logits;
  EXPECT_EQ(model->ForwardMtp({}, KvStorage{}, &logits).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(DeepseekV3, RejectsBadBatches) {
  auto backend = kernels::CreateCpuBackend({});
  auto model = Load("deepseek_v3_tiny", true, backend.get());
  ASSERT_NE(model, nullptr);
  TestKv kv(model->kv_layout(), 2);
  const std::vector<std::int32_t> table = {0, 1};
  const std::vector<std::int32_t> ok_tokens = {1, 2, 3};
  const std::vector<std::int32_t> bad_token = {1, 256};
  std::vector<float> logits;
  SequenceChunk c;
  c.block_table = table;
  c.tokens = bad_token;
  EXPECT_EQ(model->Forward({&c, 1}, kv.storage, &logits).code(),
            absl::StatusCode::kInvalidArgument);
  c.tokens = ok_tokens;
  c.start_pos = 6;  // 9 tokens > 2 blocks of 4
  EXPECT_EQ(model->Forward({&c, 1}, kv.storage, &logits).code(),
            absl::StatusCode::kInvalidArgument);
  c.start_pos = 0;
  const std::vector<std::int32_t> bad_table = {7, 0};
  c.block_table = bad_table;
  EXPECT_EQ(model->Forward({&c, 1}, kv.storage, &logits).code(),
            absl::StatusCode::kInvalidArgument);
  TestKv wrong(KvLayout{3, 16}, 2);
  c.block_table = table;
  EXPECT_EQ(model->Forward({&c, 1}, wrong.storage, &logits).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(logits.empty());
}

}  // namespace
}  // namespace tandem::model
