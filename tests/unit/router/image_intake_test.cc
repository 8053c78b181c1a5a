// The router's image intake: data: URLs read and measured as recipe does, remote URLs refused
// without a fetcher, bad images refused with recipe's message, and placeholder ids that tell
// images (and detail levels) apart while the same image always gets the same ids.
#include "api/endpoints/image_intake.h"

#include <set>
#include <string>
#include <vector>

#include "../image/image_test_util.h"
#include "absl/strings/escaping.h"
#include "gtest/gtest.h"

namespace tandem::router {
namespace {

constexpr std::int32_t kImageToken = 129264;

// A valid 1x1 RGB PNG whose one pixel depends on `red`.
std::string Png(unsigned char red) {
  return image::testing::Png(1, 1, 2, 8, [red](int, int, int c) { return c == 0 ? red : 0x20; });
}

recipe::Conversation WithImages(const std::vector<std::string>& urls,
                                recipe::ImageDetail detail = recipe::ImageDetail::kHigh) {
  recipe::Conversation c;
  recipe::Message m;
  m.role = recipe::Role::kUser;
  for (const std::string& url : urls) {
    recipe::ImageSource s;
    s.kind = url.rfind("data:", 0) == 0 ? recipe::ImageSource::Kind::kDataUrl
                                         : recipe::ImageSource::Kind::kUrl;
    s.data = url;
    s.detail = detail;
    s.path = ".messages[0]";
    m.image_sources.push_back(s);
  }
  c.messages.push_back(m);
  return c;
}

std::string DataUrl(const std::string& bytes) {
  return "data:image/png;base64," + absl::Base64Escape(bytes);
}

TEST(ImageIntakeTest, ImagesAreMeasuredAndTheirPlaceholdersTellThemApart) {
  auto images = TakeImages(WithImages({DataUrl(Png(1)), DataUrl(Png(2)), DataUrl(Png(1))}),
                           image::ImageLimits{}, nullptr);
  ASSERT_TRUE(images.ok()) << images.status();
  ASSERT_EQ(images->size(), 3u);
  const std::uint32_t rows = (*images)[0].rows;
  ASSERT_GT(rows, 0u);
  std::vector<std::int32_t> prompt = {5, kImageToken, 6, kImageToken, kImageToken, 7};
  ASSERT_TRUE(ExpandImagePlaceholders(kImageToken, &prompt, &*images).ok());
  ASSERT_EQ(prompt.size(), 3 + 3 * rows);
  const auto ids_of = [&](const RequestImage& image) {
    return std::vector<std::int32_t>(prompt.begin() + image.position,
                                     prompt.begin() + image.position + image.rows);
  };
  EXPECT_EQ((*images)[0].content_key, (*images)[2].content_key) << "the same image, the same key";
  EXPECT_NE((*images)[0].content_key, (*images)[1].content_key);
  EXPECT_EQ((*images)[0].position, 1u);
  EXPECT_EQ(prompt[(*images)[0].position + rows], 6);
  for (const RequestImage& image : *images) {
    EXPECT_EQ(image.token_id, kImageToken);
    for (std::int32_t id : ids_of(image)) EXPECT_LT(id, 0);
  }
  // Positions within one image differ; another image differs everywhere; the same image again
  // is the same.
  const std::vector<std::int32_t> a = ids_of((*images)[0]), b = ids_of((*images)[1]),
                                  again = ids_of((*images)[2]);
  EXPECT_EQ(std::set<std::int32_t>(a.begin(), a.end()).size(), a.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NE(a[i], b[i]) << i;
  EXPECT_EQ(a, again);
  // Another detail level is another encoding, so other ids.
  auto low = TakeImages(WithImages({DataUrl(Png(1))}, recipe::ImageDetail::kLow),
                        image::ImageLimits{}, nullptr);
  ASSERT_TRUE(low.ok());
  std::vector<std::int32_t> low_prompt = {kImageToken};
  ASSERT_TRUE(ExpandImagePlaceholders(kImageToken, &low_prompt, &*low).ok());
  EXPECT_NE(low_prompt[0], a[0]);
}

TEST(ImageIntakeTest, BadImagesAndUrlsAreRefusedWithALocatedMessage) {
  auto corrupt = TakeImages(WithImages({DataUrl(Png(1).substr(0, 30))}), image::ImageLimits{},
                            nullptr);
  ASSERT_FALSE(corrupt.ok());
  EXPECT_NE(corrupt.status().message().find("unsupported image"), std::string::npos)
      << corrupt.status();
  EXPECT_NE(corrupt.status().message().find("image[0]"), std::string::npos) << corrupt.status();
  auto remote = TakeImages(WithImages({"https://example.com/cat.png"}), image::ImageLimits{},
                           nullptr);
  ASSERT_FALSE(remote.ok());
  EXPECT_NE(remote.status().message().find("not fetched"), std::string::npos);
  image::ImageLimits two;
  two.max_images = 2;
  EXPECT_FALSE(TakeImages(WithImages({DataUrl(Png(1)), DataUrl(Png(2)), DataUrl(Png(3))}), two,
                          nullptr)
                   .ok());
}

TEST(ImageIntakeTest, APromptWithoutAPlaceholderPerImageIsRefused) {
  auto images = TakeImages(WithImages({DataUrl(Png(1)), DataUrl(Png(2))}), image::ImageLimits{},
                           nullptr);
  ASSERT_TRUE(images.ok());
  std::vector<std::int32_t> prompt = {5, kImageToken, 6};
  const std::vector<std::int32_t> before = prompt;
  EXPECT_FALSE(ExpandImagePlaceholders(kImageToken, &prompt, &*images).ok());
  EXPECT_EQ(prompt, before);
}

}  // namespace
}  // namespace tandem::router
