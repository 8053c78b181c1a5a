#include "api/endpoints/image_intake.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "tandem/base/hash.h"
#include "tandem/image/data_url.h"
#include "tandem/image/errors.h"
#include "tandem/image/preprocess.h"
#include "tandem/recipe/errors.h"
#include "tandem/security/digest.h"

namespace tandem::router {
namespace {

v1::ImageDetailLevel ToProto(recipe::ImageDetail detail) {
  switch (detail) {
    case recipe::ImageDetail::kLow:
      return v1::IMAGE_DETAIL_LOW;
    case recipe::ImageDetail::kOriginal:
      return v1::IMAGE_DETAIL_ORIGINAL;
    default:
      return v1::IMAGE_DETAIL_HIGH;
  }
}

image::Detail ToImage(recipe::ImageDetail detail) {
  switch (detail) {
    case recipe::ImageDetail::kLow:
      return image::Detail::kLow;
    case recipe::ImageDetail::kOriginal:
      return image::Detail::kOriginal;
    case recipe::ImageDetail::kAuto:
      return image::Detail::kAuto;
    default:
      return image::Detail::kHigh;
  }
}

// An image failure as the protocols report it: recipe's message, a 400.
absl::Status AsRequestError(const absl::Status& status) {
  if (status.code() == absl::StatusCode::kInvalidArgument) {
    return recipe::RequestError(status.message());
  }
  return status;
}

// 64 bits of the image's identity: SHA-256 over a domain tag, the detail and the bytes.
std::uint64_t ImageKey(const std::string& bytes, v1::ImageDetailLevel detail) {
  // The bytes' own digest inside the tagged one: the image (up to tens of MB) is hashed where it
  // lies instead of being copied behind the tag.
  const std::string digest =
      security::Sha256(absl::StrCat("tandem.image-placeholder/v1", "\n", static_cast<int>(detail),
                                    "\n", security::Sha256(bytes)));
  std::uint64_t key = 0;
  for (int i = 0; i < 8; ++i) key = (key << 8) | static_cast<unsigned char>(digest[i]);
  return key;
}

}  // namespace

absl::StatusOr<std::vector<RequestImage>> TakeImages(const recipe::Conversation& conversation,
                                                     const image::ImageLimits& limits,
                                                     const image::ImageFetcher* fetcher) {
  std::vector<const recipe::ImageSource*> sources;
  for (const recipe::Message& message : conversation.messages) {
    for (const recipe::ImageSource& source : message.image_sources) sources.push_back(&source);
  }
  std::vector<RequestImage> images;
  if (sources.empty()) return images;
  image::ImageBudget budget(limits);
  if (absl::Status st = budget.AdmitCount(sources.size()); !st.ok()) return AsRequestError(st);
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const recipe::ImageSource& source = *sources[i];
    auto located = [&](const absl::Status& st) {
      return AsRequestError(image::WithImageLocation(st, source.path, i));
    };
    std::string bytes;
    switch (source.kind) {
      case recipe::ImageSource::Kind::kDataUrl: {
        absl::StatusOr<std::string> decoded =
            image::DecodeDataUrl(source.data, limits.max_image_bytes);
        if (!decoded.ok()) return located(decoded.status());
        bytes = std::move(*decoded);
        break;
      }
      case recipe::ImageSource::Kind::kBytes:
        bytes = source.data;
        break;
      case recipe::ImageSource::Kind::kUrl: {
        if (fetcher == nullptr) {
          return recipe::RequestError(
              absl::StrCat(source.path,
                           ": image URLs are not fetched by this server; send the image as a "
                           "base64 data URL"));
        }
        absl::StatusOr<std::string> fetched = fetcher->Fetch(source.data);
        if (!fetched.ok()) return located(fetched.status());
        bytes = std::move(*fetched);
        break;
      }
    }
    if (absl::Status st = budget.Reserve(bytes.size()); !st.ok()) return located(st);
    // Measured here (from the header for PNG and JPEG: no pixel memory on the router, whatever
    // the request holds), so that the prompt knows how many positions the image takes and an
    // image recipe refuses by its header is refused before anything runs. A body that does not
    // decode fails at the encoder, with the same message.
    const image::PreprocessOptions options =
        limits.OptionsFor(ToImage(source.detail), sources.size());
    absl::StatusOr<image::ImageGeometry> measured = image::MeasureImage(bytes, options);
    if (!measured.ok()) return located(measured.status());
    RequestImage image;
    image.detail = ToProto(source.detail);
    image.rows = static_cast<std::uint32_t>(measured->image_tokens);
    image.path = source.path;
    image.index = i;
    image.bytes = std::make_shared<const std::string>(std::move(bytes));
    images.push_back(std::move(image));
  }
  return images;
}

absl::Status ExpandImagePlaceholders(std::int32_t image_token_id, std::vector<std::int32_t>* prompt,
                                     std::vector<RequestImage>* images) {
  std::vector<std::int32_t> expanded;
  expanded.reserve(prompt->size());
  std::size_t next = 0;
  for (std::int32_t id : *prompt) {
    if (id != image_token_id || next == images->size()) {
      expanded.push_back(id);
      continue;
    }
    RequestImage& image = (*images)[next++];
    image.position = static_cast<std::uint32_t>(expanded.size());
    image.token_id = image_token_id;
    const std::uint64_t key = ImageKey(*image.bytes, image.detail);
    image.content_key = key;
    for (std::uint32_t r = 0; r < image.rows; ++r) {
      std::uint8_t mix[12];
      for (int b = 0; b < 8; ++b) mix[b] = static_cast<std::uint8_t>(key >> (8 * b));
      for (int b = 0; b < 4; ++b) mix[8 + b] = static_cast<std::uint8_t>(r >> (8 * b));
      const std::uint64_t h = StableHash64({mix, sizeof(mix)}, 0x696d616765ULL);
      expanded.push_back(-1 - static_cast<std::int32_t>(h & 0x7fffffff));
    }
  }
  if (next != images->size()) {
    return recipe::RequestError(absl::StrCat("the prompt holds ", next, " image placeholders for ",
                                             images->size(), " images"));
  }
  *prompt = std::move(expanded);
  return absl::OkStatus();
}

}  // namespace tandem::router
