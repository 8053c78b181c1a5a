// The V4.1 token spec against values read from deepseek-recipe 0.2.0 (ImageInfo sizes from
// OpenCvImagePreprocessor, token counts from MultiModalData.image_token_adjustment() + 1).
#include "tandem/image/token_spec.h"

#include "gtest/gtest.h"

namespace tandem::image {
namespace {

struct Fit {
  std::size_t width, height, best_width, best_height, tokens;
};

TEST(TokenSpec, FittedSizesAndTokensMatchRecipe) {
  const Fit cases[] = {
      {1, 1, 546, 546, 184},      {10, 10, 546, 546, 184},      {100, 50, 770, 392, 202},
      {27, 13, 784, 378, 182},    {640, 480, 644, 490, 206},    {1024, 1024, 1036, 1036, 652},
      {2048, 2048, 1302, 1302, 994}, {2048, 10, 7798, 42, 189},
  };
  for (const Fit& c : cases) {
    absl::StatusOr<ResizeResult> r = CalcResize(c.width, c.height);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->best_width, c.best_width) << c.width << "x" << c.height;
    EXPECT_EQ(r->best_height, c.best_height) << c.width << "x" << c.height;
    EXPECT_EQ(r->num_tokens, c.tokens) << c.width << "x" << c.height;
    // A fitted size is a fixed point: fitting it again changes nothing.
    absl::StatusOr<ResizeResult> again = CalcResize(r->best_width, r->best_height);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *r);
  }
}

TEST(TokenSpec, TokenCountsMatchRecipe) {
  const std::size_t cases[][3] = {
      {1, 1, 184},       {14, 14, 184},       {546, 546, 184},    {547, 547, 212},
      {588, 588, 212},   {600, 600, 242},     {1000, 1000, 602},  {1302, 1302, 994},
      {3000, 3000, 994}, {10000, 10000, 994}, {100, 5000, 482},   {28, 2000, 332},
      {644, 490, 206},   {640, 480, 206},     {1, 10000, 1024},
  };
  for (const auto& c : cases) {
    absl::StatusOr<std::size_t> n = ImageTokenCount(c[0], c[1]);
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(*n, c[2]) << c[0] << "x" << c[1];
  }
}

TEST(TokenSpec, NeverExceedsTheBudgetAndAlignsToPatches) {
  for (std::size_t w = 1; w < 9000; w += 337) {
    for (std::size_t h = 1; h < 9000; h += 419) {
      absl::StatusOr<ResizeResult> r = CalcResize(w, h);
      ASSERT_TRUE(r.ok()) << w << "x" << h;
      EXPECT_LE(r->num_tokens, kMaxImageTokens) << w << "x" << h;
      EXPECT_EQ(r->best_width % kPatchSize, 0u);
      EXPECT_EQ(r->best_height % kPatchSize, 0u);
      EXPECT_EQ(r->num_tokens, r->n_llm_h * (r->n_llm_w + 1) + 2);
    }
  }
}

}  // namespace
}  // namespace tandem::image
