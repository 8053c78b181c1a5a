// Properties of the Llama forward pass on stories260K that the engine relies on: chunking and
// batching never change a sequence's logits, the paged cache is addressed through the block
// table, and bad batches fail before the cache is touched.
#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "llama_test_util.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/loader.h"

namespace tandem::model {
namespace {

using ::testing::HasSubstr;
using testing::KvPool;

class LlamaForwardTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    TANDEM_SKIP_WITHOUT_STORIES260K();
    backend_ = testing::MakeCpuBackend(GetParam());
    auto model = LoadModel(testing::Stories260KDir().string(), {}, backend_.get());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    vocab_ = model_->config().vocab_size;
  }

  // A deterministic pseudo-prompt: BOS then ordinary tokens.
  static std::vector<std::int32_t> Prompt(int length, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<std::int32_t> ids = {1};
    while (static_cast<int>(ids.size()) < length) ids.push_back(259 + rng() % 253);
    return ids;
  }

  // Runs `prompt` split into chunks of the given sizes, one Forward per chunk, collecting every
  // position's logits.
  std::vector<float> RunChunked(const std::vector<std::int32_t>& prompt,
                                const std::vector<int>& sizes) {
    KvPool pool(model_->kv_layout(), 8);
    const auto table = KvPool::Blocks(0, 8);
    std::vector<float> logits;
    int pos = 0;
    for (int size : sizes) {
      SequenceChunk chunk{std::span(prompt).subspan(pos, size), pos, table, LogitsMode::kAll};
      const absl::Status s = model_->Forward({&chunk, 1}, pool.storage(), &logits);
      EXPECT_TRUE(s.ok()) << s;
      pos += size;
    }
    EXPECT_EQ(pos, static_cast<int>(prompt.size()));
    return logits;
  }

  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<Model> model_;
  int vocab_ = 0;
};

TEST_P(LlamaForwardTest, ChunkingThePrefillDoesNotChangeLogits) {
  const auto prompt = Prompt(40, 1);
  const auto whole = RunChunked(prompt, {40});
  ASSERT_EQ(whole.size(), 40u * vocab_);
  EXPECT_EQ(RunChunked(prompt, {7, 13, 1, 19}), whole);
  EXPECT_EQ(RunChunked(prompt, std::vector<int>(40, 1)), whole);
}

TEST_P(LlamaForwardTest, LastModeReturnsTheLastRowOfAll) {
  const auto prompt = Prompt(21, 2);
  const auto all = RunChunked(prompt, {21});
  KvPool pool(model_->kv_layout(), 4);
  const auto table = KvPool::Blocks(0, 4);
  SequenceChunk chunk{prompt, 0, table, LogitsMode::kLast};
  std::vector<float> last = {42.0f};  // Forward appends
  ASSERT_TRUE(model_->Forward({&chunk, 1}, pool.storage(), &last).ok());
  ASSERT_EQ(last.size(), 1u + vocab_);
  EXPECT_TRUE(std::equal(last.begin() + 1, last.end(), all.end() - vocab_));

  chunk.logits = LogitsMode::kNone;
  std::vector<float> none;
  ASSERT_TRUE(model_->Forward({&chunk, 1}, pool.storage(), &none).ok());
  EXPECT_TRUE(none.empty());
}

TEST_P(LlamaForwardTest, BatchedSequencesMatchEachRunAlone) {
  // Three sequences in different states: a long prefill, a decode step on top of a cached prefix
  // and a short prefill, with different logits modes, each in its own blocks.
  const auto a = Prompt(33, 3), b = Prompt(18, 4), c = Prompt(5, 5);
  const auto table_a = KvPool::Blocks(0, 3), table_b = KvPool::Blocks(3, 2),
             table_c = KvPool::Blocks(5, 1);
  const std::span<const std::int32_t> b_prefix = std::span(b).first(17);
  const std::span<const std::int32_t> b_step = std::span(b).subspan(17);

  auto run_alone = [&](const SequenceChunk& chunk, const SequenceChunk* prefix) {
    KvPool pool(model_->kv_layout(), 6);
    std::vector<float> logits;
    if (prefix != nullptr) {
      EXPECT_TRUE(model_->Forward({prefix, 1}, pool.storage(), &logits).ok());
    }
    logits.clear();
    EXPECT_TRUE(model_->Forward({&chunk, 1}, pool.storage(), &logits).ok());
    return logits;
  };
  const SequenceChunk prefix_b{b_prefix, 0, table_b, LogitsMode::kNone};
  const SequenceChunk chunk_a{a, 0, table_a, LogitsMode::kAll};
  const SequenceChunk chunk_b{b_step, 17, table_b, LogitsMode::kLast};
  const SequenceChunk chunk_c{c, 0, table_c, LogitsMode::kLast};
  std::vector<float> expected = run_alone(chunk_a, nullptr);
  const auto alone_b = run_alone(chunk_b, &prefix_b);
  const auto alone_c = run_alone(chunk_c, nullptr);
  expected.insert(expected.end(), alone_b.begin(), alone_b.end());
  expected.insert(expected.end(), alone_c.begin(), alone_c.end());

  KvPool pool(model_->kv_layout(), 6);
  std::vector<float> logits;
  ASSERT_TRUE(model_->Forward({&prefix_b, 1}, pool.storage(), &logits).ok());
  const std::vector<SequenceChunk> batch = {chunk_a, chunk_b, chunk_c};
  ASSERT_TRUE(model_->Forward(batch, pool.storage(), &logits).ok());
  ASSERT_EQ(logits.size(), (33u + 1 + 1) * vocab_);
  EXPECT_EQ(logits, expected);
}

TEST_P(LlamaForwardTest, BlockTableOrderDoesNotMatter) {
  const auto prompt = Prompt(50, 6);
  const auto identity = RunChunked(prompt, {30, 20});
  KvPool pool(model_->kv_layout(), 8);
  const std::vector<std::int32_t> table = {6, 2, 7, 0};
  std::vector<float> logits;
  SequenceChunk first{std::span(prompt).first(30), 0, table, LogitsMode::kAll};
  SequenceChunk second{std::span(prompt).subspan(30), 30, table, LogitsMode::kAll};
  ASSERT_TRUE(model_->Forward({&first, 1}, pool.storage(), &logits).ok());
  ASSERT_TRUE(model_->Forward({&second, 1}, pool.storage(), &logits).ok());
  EXPECT_EQ(logits, identity);
  // Blocks outside the table stay untouched.
  const std::int64_t block = pool.storage().block_floats();
  for (int unused : {1, 3, 4, 5}) {
    EXPECT_TRUE(std::all_of(pool.data().begin() + unused * block,
                            pool.data().begin() + (unused + 1) * block,
                            [](float v) { return v == 0.0f; }))
        << "block " << unused;
  }
}

class LlamaBadBatchTest : public LlamaForwardTest {
 protected:
  // Forward must fail with `message` and leave the cache as it was.
  void ExpectRejected(const SequenceChunk& chunk, const std::string& message) {
    KvPool pool(model_->kv_layout(), 4);
    std::fill(pool.data().begin(), pool.data().end(), 7.0f);
    std::vector<float> logits;
    const absl::Status s = model_->Forward({&chunk, 1}, pool.storage(), &logits);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(message));
    EXPECT_TRUE(logits.empty());
    EXPECT_TRUE(std::all_of(pool.data().begin(), pool.data().end(),
                            [](float v) { return v == 7.0f; }));
  }
};

TEST_P(LlamaBadBatchTest, PromptBeyondTheContext) {
  const auto prompt = Prompt(20, 7);
  std::vector<std::int32_t> table(40, 0);
  ExpectRejected({prompt, 500, table, LogitsMode::kLast},
                 "prompt of 520 tokens exceeds the context of 512");
}

TEST_P(LlamaBadBatchTest, BlockTableTooShortOrOutOfPool) {
  const auto prompt = Prompt(20, 8);
  const std::vector<std::int32_t> short_table = {0};
  ExpectRejected({prompt, 0, short_table, LogitsMode::kLast}, "block table has 1 blocks");
  const std::vector<std::int32_t> outside = {0, 9};
  ExpectRejected({prompt, 0, outside, LogitsMode::kLast}, "entry 1 is 9");
}

TEST_P(LlamaBadBatchTest, TokenOutsideTheVocabulary) {
  auto prompt = Prompt(10, 9);
  prompt[4] = 512;
  const std::vector<std::int32_t> table = {0};
  ExpectRejected({prompt, 0, table, LogitsMode::kLast}, "token 4 has id 512");
  prompt[4] = -3;
  ExpectRejected({prompt, 0, table, LogitsMode::kLast}, "token 4 has id -3");
}

TEST_P(LlamaBadBatchTest, EmptyChunkAndNegativePosition) {
  const std::vector<std::int32_t> table = {0};
  ExpectRejected({{}, 0, table, LogitsMode::kLast}, "no tokens");
  const auto prompt = Prompt(3, 10);
  ExpectRejected({prompt, -1, table, LogitsMode::kLast}, "negative start_pos");
}

TEST_P(LlamaBadBatchTest, CacheLaidOutForAnotherModel) {
  const auto prompt = Prompt(3, 11);
  const std::vector<std::int32_t> table = {0};
  KvLayout wrong = model_->kv_layout();
  wrong.floats_per_token /= 2;
  KvPool pool(wrong, 2);
  SequenceChunk chunk{prompt, 0, table, LogitsMode::kLast};
  std::vector<float> logits;
  EXPECT_THAT(model_->Forward({&chunk, 1}, pool.storage(), &logits).message(),
              HasSubstr("floats per token"));
}

INSTANTIATE_TEST_SUITE_P(Backends, LlamaForwardTest, ::testing::Values(false, true),
                         testing::CpuBackendName);
INSTANTIATE_TEST_SUITE_P(Backends, LlamaBadBatchTest, ::testing::Values(false, true),
                         testing::CpuBackendName);

}  // namespace
}  // namespace tandem::model
