#include "tandem/image/data_url.h"

#include "image_test_util.h"

namespace tandem::image {
namespace {

using testing::ExpectImageError;

constexpr std::size_t kMax = 32u << 20;

TEST(DataUrl, DecodesBase64AndPercentEncodedBodies) {
  absl::StatusOr<std::string> b = DecodeDataUrl("data:image/png;base64,aGVsbG8=", kMax);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, "hello");
  // Forgiving base64: no padding, whitespace, percent-escapes decoded first, case-insensitive
  // scheme and marker, a fragment dropped.
  b = DecodeDataUrl("DATA:image/PNG ; BASE64,aGV%73bG8 #frag", kMax);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, "hello");
  b = DecodeDataUrl("data:image/gif,GIF89a%00%01x", kMax);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, std::string("GIF89a\0\1x", 9));
  b = DecodeDataUrl("data:image/jpg;name=a.jpg;base64,/9j/", kMax);  // image/jpg is JPEG
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, "\xff\xd8\xff");
}

TEST(DataUrl, RefusesWhatRecipeRefuses) {
  ExpectImageError(DecodeDataUrl("foo:bar", kMax).status(), ImageErrorKind::kInvalidDataUrl);
  ExpectImageError(DecodeDataUrl("data:image/png;base64", kMax).status(),
                   ImageErrorKind::kInvalidDataUrl);  // no comma
  ExpectImageError(DecodeDataUrl("data:image/png;base64,@@@@", kMax).status(),
                   ImageErrorKind::kInvalidDataUrl);
  ExpectImageError(DecodeDataUrl("data:image/png;base64,aGVsb", kMax).status(),
                   ImageErrorKind::kInvalidDataUrl);  // 5 mod 4 == 1 characters
  ExpectImageError(DecodeDataUrl("data:image/bmp;base64,aGVsbG8=", kMax).status(),
                   ImageErrorKind::kUnsupportedMediaType);
  ExpectImageError(DecodeDataUrl("data:;base64,aGVsbG8=", kMax).status(),
                   ImageErrorKind::kUnsupportedMediaType);
  ExpectImageError(DecodeDataUrl("data:text/plain,hi", kMax).status(),
                   ImageErrorKind::kUnsupportedMediaType);
  ExpectImageError(DecodeDataUrl("data:image/png;base64,", kMax).status(),
                   ImageErrorKind::kEmptyImage);
}

TEST(DataUrl, SizeIsCheckedBeforeDecoding) {
  // 8 base64 characters estimate 6 bytes: over a 4-byte limit without being decoded (they are not
  // even valid base64 of an image), with recipe's message.
  absl::Status s = DecodeDataUrl("data:image/webp;base64,AAAAAAAA", 4).status();
  ExpectImageError(s, ImageErrorKind::kImageTooLarge);
  EXPECT_EQ(s.message(), "image file size exceeds limit 0 MB");
  s = DecodeDataUrl("data:image/webp;base64," + std::string(44u << 20, 'A'), kMax).status();
  ExpectImageError(s, ImageErrorKind::kImageTooLarge);
  EXPECT_EQ(s.message(), "image file size exceeds limit 32 MB");
}

}  // namespace
}  // namespace tandem::image
