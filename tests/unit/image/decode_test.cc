// Decoding through the public API: every format and variant accepted with the right size, and
// empty, foreign, truncated and corrupt files refused with recipe's message.
#include <string>

#include "image_test_util.h"
#include "tandem/image/limits.h"
#include "tandem/image/preprocess.h"
#include "tandem/image/token_spec.h"

namespace tandem::image {
namespace {

using testing::ExpectImageError;
using testing::ExpectUnreadable;

PreprocessOptions Options(Detail detail = Detail::kHigh) {
  PreprocessOptions o = ImageLimits{}.OptionsFor(detail, 1);
  o.max_dimension_px = 2048;
  return o;
}

void ExpectAccepted(const std::string& bytes, int w, int h, const char* what) {
  absl::StatusOr<PreprocessedImage> r = PreprocessImage(bytes, Options());
  ASSERT_TRUE(r.ok()) << what << ": " << r.status();
  absl::StatusOr<ResizeResult> fit = CalcResize(w, h);
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(r->width, static_cast<int>(fit->best_width)) << what;
  EXPECT_EQ(r->height, static_cast<int>(fit->best_height)) << what;
  EXPECT_EQ(r->image_tokens, static_cast<int>(fit->num_tokens)) << what;
  EXPECT_EQ(r->rgb.size(), static_cast<std::size_t>(r->width) * r->height * 3) << what;
}

TEST(Decode, AcceptsEveryFormatAndVariant) {
  ExpectAccepted(testing::Png(100, 50), 100, 50, "png rgb");
  ExpectAccepted(testing::Png(60, 70, 0), 60, 70, "png grey");
  ExpectAccepted(testing::Png(60, 70, 4), 60, 70, "png grey+alpha");
  ExpectAccepted(testing::Png(61, 33, 6, 16), 61, 33, "png rgba 16-bit");
  ExpectAccepted(testing::Jpeg(640, 480), 640, 480, "jpeg");
  ExpectAccepted(testing::Jpeg(123, 45, 1), 123, 45, "jpeg grey");
  ExpectAccepted(testing::Jpeg(90, 91, 4), 90, 91, "jpeg cmyk");
  ExpectAccepted(testing::Jpeg(300, 20, 3, true), 300, 20, "jpeg progressive");
  ExpectAccepted(testing::Webp(77, 88), 77, 88, "webp lossy");
  ExpectAccepted(testing::Webp(77, 88, true, true), 77, 88, "webp lossless alpha");
  ExpectAccepted(testing::Gif(40, 30, 3), 40, 30, "gif animated");
}

TEST(Decode, RefusesEmptyForeignAndBrokenFiles) {
  ExpectImageError(PreprocessImage("", Options()).status(), ImageErrorKind::kEmptyImage);
  ExpectImageError(PreprocessImage("BM not an image", Options()).status(),
                   ImageErrorKind::kUnsupportedMediaType);
  const std::string files[] = {testing::Png(40, 30), testing::Jpeg(40, 30), testing::Webp(40, 30),
                               testing::Gif(40, 30)};
  for (const std::string& file : files) {
    for (std::size_t cut : {std::size_t{1}, std::size_t{4}, std::size_t{12}, file.size() / 2,
                            file.size() - 3}) {
      ExpectUnreadable(PreprocessImage(file.substr(0, cut), Options()).status());
    }
    std::string corrupt = file;
    for (std::size_t i = 20; i < corrupt.size() && i < 60; ++i) corrupt[i] = '\xff';
    absl::StatusOr<PreprocessedImage> r = PreprocessImage(corrupt, Options());
    if (!r.ok()) ExpectUnreadable(r.status());  // a decoder may still make sense of some bytes
  }
}

TEST(Decode, RefusesSidesAboveTheLimitBeforeDecoding) {
  ExpectImageError(PreprocessImage(testing::Png(2049, 3), Options()).status(),
                   ImageErrorKind::kImageDimensionsTooLarge);
  ExpectImageError(PreprocessImage(testing::Jpeg(3, 2049), Options()).status(),
                   ImageErrorKind::kImageDimensionsTooLarge);
  ExpectAccepted(testing::Png(2048, 3), 2048, 3, "at the limit");
}

TEST(Decode, TransparencyBlendsOntoRecipesBackgroundAndPaddingIsGrey) {
  // Fully transparent 544x272 RGBA: fitted to 546x280 (pad rows top and bottom), no WebP trip.
  PreprocessOptions o = Options();
  o.webp_roundtrip = false;
  absl::StatusOr<PreprocessedImage> r =
      PreprocessImage(testing::Png(544, 272, 6, 8, [](int, int, int c) { return c == 3 ? 0 : 9; }), o);
  ASSERT_TRUE(r.ok()) << r.status();
  const int mid = (r->height / 2 * r->width + r->width / 2) * 3;
  EXPECT_EQ(r->rgb[mid], 0xfd);
  EXPECT_EQ(r->rgb[mid + 1], 0xfd);
  EXPECT_EQ(r->rgb[mid + 2], 0xfd);
  EXPECT_EQ(r->rgb[0], 127);  // top-left corner is padding
}

TEST(Decode, GifTakesTheFirstFrameAndItsTransparency) {
  PreprocessOptions o = Options();
  o.webp_roundtrip = false;
  // Frame 0 paints index 0 (red), frame 1 index 1 (green): only red may show.
  absl::StatusOr<PreprocessedImage> r = PreprocessImage(testing::Gif(544, 544, 2), o);
  ASSERT_TRUE(r.ok()) << r.status();
  const int mid = (r->height / 2 * r->width + r->width / 2) * 3;
  EXPECT_EQ(r->rgb[mid], 255);
  EXPECT_EQ(r->rgb[mid + 1], 0);
  // The same with index 0 transparent: the background shows.
  r = PreprocessImage(testing::Gif(544, 544, 2, 0), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rgb[mid], 0xfd);
  EXPECT_EQ(r->rgb[mid + 1], 0xfd);
}

TEST(Decode, LowDetailCapsTheLongSideBeforeFitting) {
  absl::StatusOr<PreprocessedImage> high = PreprocessImage(testing::Png(1600, 1200), Options());
  absl::StatusOr<PreprocessedImage> low =
      PreprocessImage(testing::Png(1600, 1200), Options(Detail::kLow));
  ASSERT_TRUE(high.ok() && low.ok());
  absl::StatusOr<ResizeResult> capped = CalcResize(512, 384);
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(low->width, static_cast<int>(capped->best_width));
  EXPECT_EQ(low->image_tokens, static_cast<int>(capped->num_tokens));
  EXPECT_GT(high->image_tokens, low->image_tokens);
}

}  // namespace
}  // namespace tandem::image
