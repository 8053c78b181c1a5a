// Input embeddings (image rows) stand in for token embeddings at placeholder positions: rows equal
// to the table's rows for some tokens give exactly the logits of those tokens, other rows change
// the result, and placeholder ids are accepted only where rows cover them.
#include <memory>
#include <string>
#include <vector>

#include "embedding_table.h"
#include "gtest/gtest.h"
#include "hf_fixture_test_util.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/loader.h"

namespace tandem::model {
namespace {

using testing::FixtureDir;
using testing::TestKv;

class InputEmbeddingsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend_ = kernels::CreateCpuBackend({});
    auto model = LoadModel(FixtureDir(GetParam()), LoadOptions{}, backend_.get());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    auto table = testing::LoadEmbeddingTable(FixtureDir(GetParam()));
    ASSERT_TRUE(table.ok()) << table.status();
    table_ = std::move(*table);
  }

  std::vector<float> TableRows(const std::vector<std::int32_t>& ids) const {
    return table_.Rows(ids);
  }

  // All-positions logits of one chunk over `tokens`, with `spans` as its input embeddings.
  absl::StatusOr<std::vector<float>> Run(const std::vector<std::int32_t>& tokens,
                                         const std::vector<InputEmbeddings>& spans) {
    TestKv kv(model_->kv_layout(), 16);
    const std::vector<std::int32_t> table = TestKv::Table(0, 16);
    SequenceChunk c;
    c.tokens = tokens;
    c.embeddings = spans;
    c.block_table = table;
    c.logits = LogitsMode::kAll;
    std::vector<float> logits;
    absl::Status st = model_->Forward({&c, 1}, kv.storage, &logits);
    if (!st.ok()) return st;
    return logits;
  }

  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<Model> model_;
  testing::EmbeddingTable table_;
};

TEST_P(InputEmbeddingsTest, RowsFromTheTableGiveExactlyTheLogitsOfTheirTokens) {
  // Each span repeats one token, as an image repeats its placeholder (which V4's hash-routed
  // experts read as the token there).
  const std::vector<std::int32_t> prompt = {1, 17, 42, 42, 42, 200, 3, 55, 12, 9};
  auto want = Run(prompt, {});
  ASSERT_TRUE(want.ok()) << want.status();
  // Positions 2..4 and 7 become placeholders carrying the same vectors as rows.
  std::vector<std::int32_t> placeholders = prompt;
  placeholders[2] = -11;
  placeholders[3] = -12;
  placeholders[4] = -13;
  placeholders[7] = -14;
  const std::vector<float> image_a = TableRows({42, 42, 42});
  const std::vector<float> image_b = TableRows({55});
  auto got = Run(placeholders, {{2, 3, image_a.data(), 42}, {7, 1, image_b.data(), 55}});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, *want);
}

TEST_P(InputEmbeddingsTest, OtherRowsChangeTheLogitsFromTheirPositionOn) {
  const std::vector<std::int32_t> prompt = {1, 17, 42, 99, 7, 200, 3, 55};
  std::vector<float> rows = TableRows({42, 99});
  for (float& v : rows) v = v * 0.5f + 0.25f;
  // The same ids as the prompt wherever the model reads ids: only the rows differ.
  std::vector<std::int32_t> placeholders = prompt;
  placeholders[2] = -1;
  placeholders[3] = -2;
  std::vector<std::int32_t> same_ids = prompt;
  same_ids[3] = 42;
  auto base = Run(same_ids, {});
  auto got = Run(placeholders, {{2, 2, rows.data(), 42}});
  ASSERT_TRUE(base.ok() && got.ok());
  const std::size_t vocab = base->size() / prompt.size();
  // Causal: rows before the image are unchanged, rows from it on are not.
  EXPECT_TRUE(std::equal(base->begin(), base->begin() + 2 * vocab, got->begin()));
  EXPECT_FALSE(std::equal(base->begin() + 2 * vocab, base->end(), got->begin() + 2 * vocab));
}

TEST_P(InputEmbeddingsTest, PlaceholdersOutsideRowsAndMalformedSpansAreRefused) {
  const std::vector<float> rows = TableRows({5, 6});
  // A placeholder id no rows cover.
  EXPECT_EQ(Run({1, -3, 4, 5}, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Run({1, -3, -4, 5}, {{1, 1, rows.data()}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Spans past the chunk, overlapping, out of order, or without data.
  EXPECT_FALSE(Run({1, 2, -3, -4}, {{3, 2, rows.data()}}).ok());
  EXPECT_FALSE(Run({1, -2, -3, 4}, {{1, 2, rows.data()}, {2, 1, rows.data()}}).ok());
  EXPECT_FALSE(Run({-1, 2, -3, 4}, {{2, 1, rows.data()}, {0, 1, rows.data()}}).ok());
  EXPECT_FALSE(Run({1, -2, 3, 4}, {{1, 1, nullptr}}).ok());
  EXPECT_FALSE(Run({1, -2, 3, 4}, {{1, 1, rows.data(), -5}}).ok());
  EXPECT_TRUE(Run({1, -2, -3, 4}, {{1, 2, rows.data()}}).ok());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, InputEmbeddingsTest,
                         ::testing::Values("llama_tiny", "deepseek_v4_tiny"));

}  // namespace
}  // namespace tandem::model
