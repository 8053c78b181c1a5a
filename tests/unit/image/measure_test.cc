// MeasureImage gives PreprocessImage's size and image_tokens (the router counts prompt positions
// with it), from the header alone for PNG and JPEG.
#include <chrono>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "image_test_util.h"
#include "tandem/image/limits.h"
#include "tandem/image/preprocess.h"

namespace tandem::image {
namespace {

struct Case {
  std::string name;
  std::string bytes;
};

std::vector<Case> Images() {
  std::vector<Case> cases;
  // Sides around the patch grid, the low-detail limit, extreme aspect ratios and the sizes
  // recipe's fit scales up or down.
  const std::vector<std::pair<int, int>> sizes = {
      {1, 1}, {13, 29}, {42, 42}, {64, 48}, {300, 20}, {20, 300}, {511, 513}, {512, 512},
      {640, 480}, {1000, 70}, {1100, 900}, {1500, 1500}, {2048, 100}};
  for (const auto& [w, h] : sizes) {
    cases.push_back({"png " + std::to_string(w) + "x" + std::to_string(h),
                     testing::Png(static_cast<std::uint32_t>(w), static_cast<std::uint32_t>(h))});
    cases.push_back({"jpeg " + std::to_string(w) + "x" + std::to_string(h), testing::Jpeg(w, h)});
  }
  cases.push_back({"webp 300x200", testing::Webp(300, 200)});
  cases.push_back({"gif 120x90", testing::Gif(120, 90)});
  return cases;
}

TEST(MeasureImageTest, EqualsPreprocessingsSizeAndTokensAtEveryDetail) {
  const ImageLimits limits;
  for (const Case& c : Images()) {
    for (Detail detail : {Detail::kLow, Detail::kHigh, Detail::kOriginal, Detail::kAuto}) {
      const PreprocessOptions options = limits.OptionsFor(detail, 1);
      absl::StatusOr<PreprocessedImage> full = PreprocessImage(c.bytes, options);
      absl::StatusOr<ImageGeometry> measured = MeasureImage(c.bytes, options);
      ASSERT_EQ(full.ok(), measured.ok()) << c.name << ": " << full.status() << " / "
                                          << measured.status();
      if (!full.ok()) {
        EXPECT_EQ(full.status().message(), measured.status().message()) << c.name;
        continue;
      }
      EXPECT_EQ(measured->width, full->width) << c.name;
      EXPECT_EQ(measured->height, full->height) << c.name;
      EXPECT_EQ(measured->image_tokens, full->image_tokens) << c.name;
    }
  }
}

TEST(MeasureImageTest, AHugeDeclaredPngIsMeasuredWithoutDecodingAndOversizeIsRefused) {
  // 8000 x 8000 declared over a few hundred bytes of data: measuring it costs no pixel memory.
  const std::string idat = "not really image data";
  const std::string bomb = testing::Png(8000, 8000, 2, 8, testing::Pattern, &idat);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<ImageGeometry> measured = MeasureImage(bomb, ImageLimits{}.OptionsFor(Detail::kHigh, 1));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(50));
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_GT(measured->image_tokens, 0);
  // Past the dimension limit, refused as PreprocessImage refuses it.
  const std::string too_big = testing::Png(9000, 10, 2, 8, testing::Pattern, &idat);
  absl::StatusOr<ImageGeometry> refused = MeasureImage(too_big, ImageLimits{}.OptionsFor(Detail::kHigh, 1));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(GetImageErrorKind(refused.status()), ImageErrorKind::kImageDimensionsTooLarge);
  EXPECT_FALSE(MeasureImage("", ImageLimits{}.OptionsFor(Detail::kHigh, 1)).ok());
}

}  // namespace
}  // namespace tandem::image
