#include "image_test_util.h"
#include "tandem/image/errors.h"
#include "tandem/image/limits.h"

namespace tandem::image {
namespace {

using testing::ExpectImageError;

TEST(ImageErrors, MessagesAreRecipes) {
  EXPECT_EQ(ImageError(ImageErrorKind::kImageTooLarge, 40u << 20, 32u << 20).message(),
            "image file size exceeds limit 32 MB");
  EXPECT_EQ(ImageError(ImageErrorKind::kTotalSizeTooLarge, (90u << 20) + 207, 64u << 20).message(),
            "Total image size exceeds the limit: max 64 MB per request, got 90 MB");
  EXPECT_EQ(ImageError(ImageErrorKind::kTooManyImages, 601, 600).message(),
            "Too many images: max 600 images per request, got 601");
  EXPECT_EQ(ImageError(ImageErrorKind::kDecode).message(), kUnsupportedImageMessage);
}

TEST(ImageErrors, LocationPrefixesPerImageFailuresOnly) {
  absl::Status located = WithImageLocation(ImageError(ImageErrorKind::kDecode), "", 1);
  EXPECT_EQ(located.message(), absl::StrCat("image[1]: ", kUnsupportedImageMessage));
  ExpectImageError(located, ImageErrorKind::kDecode);
  located = WithImageLocation(ImageError(ImageErrorKind::kImageTooLarge, 1, 32u << 20),
                              "messages.0.content[1]", 0);
  EXPECT_EQ(located.message(), "messages.0.content[1].image[0]: image file size exceeds limit 32 MB");
  const absl::Status total = ImageError(ImageErrorKind::kTotalSizeTooLarge, 1, 2);
  EXPECT_EQ(WithImageLocation(total, "x", 3), total);
  EXPECT_EQ(WithImageLocation(absl::InternalError("other"), "x", 3), absl::InternalError("other"));
}

TEST(ImageBudget, CountThenBytesInRecipesOrder) {
  ImageLimits limits;
  limits.max_image_bytes = 8;
  limits.max_total_bytes = 10;
  limits.max_images = 3;
  ImageBudget budget(limits);
  ExpectImageError(budget.AdmitCount(4), ImageErrorKind::kTooManyImages);
  EXPECT_EQ(budget.images(), 0u);
  ASSERT_TRUE(budget.AdmitCount(2).ok());
  ExpectImageError(budget.AdmitCount(2), ImageErrorKind::kTooManyImages);  // 2 + 2 > 3
  ExpectImageError(budget.Reserve(9), ImageErrorKind::kImageTooLarge);
  ASSERT_TRUE(budget.Reserve(6).ok());
  ExpectImageError(budget.Reserve(5), ImageErrorKind::kTotalSizeTooLarge);
  EXPECT_EQ(budget.bytes(), 6u);  // a refused reservation keeps nothing
  ASSERT_TRUE(budget.Reserve(4).ok());
  EXPECT_EQ(budget.bytes(), 10u);
}

TEST(ImageLimits, ManyImagesLowerTheDimensionLimit) {
  ImageLimits limits;
  EXPECT_EQ(limits.OptionsFor(Detail::kHigh, 14).max_dimension_px, 8192u);
  EXPECT_EQ(limits.OptionsFor(Detail::kHigh, 15).max_dimension_px, 4096u);
  EXPECT_EQ(limits.OptionsFor(Detail::kLow, 1).low_detail_max_dimension_px, 512u);
}

}  // namespace
}  // namespace tandem::image
