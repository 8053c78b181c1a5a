// Images in the engine: rows at placeholder positions reach the model (rows equal to the table's
// rows give the plain prompt's output, through chunked prefill too), the placeholders' ids key
// the prefix cache (the same image hits, another image misses past the text before it), and
// malformed images are refused without state.
#include <memory>
#include <string>
#include <vector>

#include "../model/embedding_table.h"
#include "gtest/gtest.h"
#include "tandem/engine/engine.h"
#include "tandem/kernels/backend.h"
#include "tandem/model/loader.h"

namespace tandem::engine {
namespace {

const std::string kFixture = std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/llama_tiny";
constexpr int kBlockSize = 4;

struct Outcome {
  std::vector<std::int32_t> tokens;
  int cached_tokens = 0;
  FinishReason reason = FinishReason::kNone;
  std::string error;
  bool image_rows_missing = false;
};

class InputImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = kernels::CreateCpuBackend({1});
    auto model = model::LoadModel(kFixture, model::LoadOptions{}, backend_.get());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    auto table = model::testing::LoadEmbeddingTable(kFixture);
    ASSERT_TRUE(table.ok()) << table.status();
    table_ = std::move(*table);
    engine_ = MakeEngine(64);
  }

  std::unique_ptr<Engine> MakeEngine(int max_batch_tokens) {
    EngineConfig cfg;
    cfg.block_size = kBlockSize;
    cfg.num_blocks = 64;
    cfg.max_num_seqs = 4;
    cfg.max_batch_tokens = max_batch_tokens;
    cfg.enable_prefix_caching = true;
    auto e = Engine::Create(model_.get(), backend_.get(), cfg);
    EXPECT_TRUE(e.ok()) << e.status();
    return std::move(*e);
  }

  // An image whose rows are the table rows of `token` repeated, at `position`, keyed `key`.
  InputImage Image(int position, int rows, std::int32_t token) const {
    auto data = std::make_shared<std::vector<float>>(
        table_.Rows(std::vector<std::int32_t>(rows, token)));
    return InputImage{position, rows, token, std::move(data)};
  }

  // Placeholder ids of image `key` at its rows, as the router writes them.
  static void Placeholders(std::vector<std::int32_t>* prompt, int position, int rows, int key) {
    for (int r = 0; r < rows; ++r) (*prompt)[position + r] = -(key * 1000 + r + 1);
  }

  Outcome Run(Engine& engine, const std::string& id, const std::vector<std::int32_t>& prompt,
              std::vector<InputImage> images) {
    SamplingParams params;
    params.temperature = 0;
    params.max_tokens = 8;
    Engine::RequestOptions options;
    options.images = std::move(images);
    Outcome out;
    absl::Status st = engine.AddRequest(id, prompt, params, options);
    if (!st.ok()) {
      out.error = std::string(st.message());
      return out;
    }
    while (engine.HasPendingWork()) {
      auto step = engine.Step();
      EXPECT_TRUE(step.ok()) << step.status();
      if (!step.ok()) break;
      for (const StepOutput& o : *step) {
        if (o.request_id != id) continue;
        out.tokens.insert(out.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
        if (o.cached_tokens > 0) out.cached_tokens = o.cached_tokens;
        if (o.finished) {
          out.reason = o.finish_reason;
          out.error = o.error;
          out.image_rows_missing = o.image_rows_missing;
        }
      }
    }
    return out;
  }

  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<Engine> engine_;
  model::testing::EmbeddingTable table_;
};

// 6 text tokens, an image of 5 rows standing for token 42 at [6, 11), 5 text tokens.
std::vector<std::int32_t> Prompt() { return {1, 9, 23, 77, 5, 31, 42, 42, 42, 42, 42, 8, 61, 4, 13, 2}; }

TEST_F(InputImageTest, RowsEqualToTheTableGiveThePlainPromptsOutputWholeAndChunked) {
  const std::vector<std::int32_t> plain = Prompt();
  const Outcome want = Run(*engine_, "plain", plain, {});
  ASSERT_TRUE(want.error.empty()) << want.error;
  std::vector<std::int32_t> with_image = plain;
  Placeholders(&with_image, 6, 5, 1);
  auto fresh = MakeEngine(64);
  const Outcome got = Run(*fresh, "image", with_image, {Image(6, 5, 42)});
  ASSERT_TRUE(got.error.empty()) << got.error;
  EXPECT_EQ(got.tokens, want.tokens);
  // Chunks of 3 tokens split the image across three steps.
  auto chunked = MakeEngine(3);
  const Outcome split = Run(*chunked, "chunked", with_image, {Image(6, 5, 42)});
  ASSERT_TRUE(split.error.empty()) << split.error;
  EXPECT_EQ(split.tokens, want.tokens);
}

TEST_F(InputImageTest, TheSameImageHitsThePrefixCacheAndAnotherImageMissesPastTheText) {
  std::vector<std::int32_t> first = Prompt();
  Placeholders(&first, 6, 5, 1);
  const Outcome a = Run(*engine_, "a", first, {Image(6, 5, 42)});
  ASSERT_TRUE(a.error.empty()) << a.error;
  const Outcome again = Run(*engine_, "again", first, {Image(6, 5, 42)});
  // 16 tokens: the last full block before the final token is reused, image included.
  EXPECT_GE(again.cached_tokens, 12);
  EXPECT_EQ(again.tokens, a.tokens);
  std::vector<std::int32_t> other = Prompt();
  Placeholders(&other, 6, 5, 2);
  const Outcome b = Run(*engine_, "other", other, {Image(6, 5, 17)});
  ASSERT_TRUE(b.error.empty()) << b.error;
  // Only the block wholly before the image (tokens 0..3) is shared.
  EXPECT_EQ(b.cached_tokens, kBlockSize);
}

TEST_F(InputImageTest, MalformedImagesAreRefusedAndLeaveNoState) {
  std::vector<std::int32_t> prompt = Prompt();
  Placeholders(&prompt, 6, 5, 1);
  // A placeholder that no image covers.
  std::vector<std::int32_t> stray = prompt;
  stray[2] = -5;
  EXPECT_FALSE(Run(*engine_, "stray", stray, {Image(6, 5, 42)}).error.empty());
  // Rows of the wrong size, overlapping images, an image past the prompt.
  InputImage short_rows = Image(6, 5, 42);
  short_rows.data = std::make_shared<std::vector<float>>(7, 0.0f);
  EXPECT_FALSE(Run(*engine_, "short", prompt, {short_rows}).error.empty());
  EXPECT_FALSE(Run(*engine_, "overlap", prompt, {Image(6, 3, 42), Image(8, 3, 42)}).error.empty());
  EXPECT_FALSE(Run(*engine_, "past", prompt, {Image(14, 5, 42)}).error.empty());
  for (const Outcome& refused :
       {Run(*engine_, "short", prompt, {short_rows}),
        Run(*engine_, "past", prompt, {Image(14, 5, 42)})}) {
    EXPECT_FALSE(refused.image_rows_missing) << "a malformed request is not a missing-rows one";
  }
  EXPECT_FALSE(engine_->HasPendingWork());
  // The same id is free again.
  EXPECT_TRUE(Run(*engine_, "stray", prompt, {Image(6, 5, 42)}).error.empty());
}

// The router sends an image without rows when it expects the prefix cache to hold its KV: the
// engine uses the cache where it does, and where it must compute the image it ends the request
// flagged image_rows_missing (the router then sends the rows), leaving no state.
TEST_F(InputImageTest, AnImageWithoutRowsRunsFromTheCacheAndOtherwiseAsksForItsRows) {
  std::vector<std::int32_t> prompt = Prompt();
  Placeholders(&prompt, 6, 5, 1);
  InputImage span_only = Image(6, 5, 42);
  span_only.data = nullptr;

  const Outcome cold = Run(*engine_, "cold", prompt, {span_only});
  EXPECT_EQ(cold.reason, FinishReason::kError);
  EXPECT_TRUE(cold.image_rows_missing);
  EXPECT_TRUE(cold.tokens.empty());
  EXPECT_FALSE(engine_->HasPendingWork());

  const Outcome with_rows = Run(*engine_, "rows", prompt, {Image(6, 5, 42)});
  ASSERT_TRUE(with_rows.error.empty()) << with_rows.error;
  const Outcome cached = Run(*engine_, "cached", prompt, {span_only});
  ASSERT_TRUE(cached.error.empty()) << cached.error;
  EXPECT_FALSE(cached.image_rows_missing);
  EXPECT_GE(cached.cached_tokens, 6 + 5) << "the image's positions came from the cache";
  EXPECT_EQ(cached.tokens, with_rows.tokens);

  // Another image at the same place is not in the cache: its rows are asked for.
  std::vector<std::int32_t> other = Prompt();
  Placeholders(&other, 6, 5, 2);
  const Outcome missing = Run(*engine_, "other", other, {span_only});
  EXPECT_TRUE(missing.image_rows_missing);
  EXPECT_FALSE(engine_->HasPendingWork());
}

}  // namespace
}  // namespace tandem::engine
