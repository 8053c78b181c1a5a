#include "content_key.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "tandem/security/digest.h"

namespace tandem::encoder {
namespace {

void AppendField(std::string* out, absl::string_view field) {
  const std::uint64_t n = field.size();
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out->append(field.data(), field.size());
}

}  // namespace

std::string ContentKey(const EncodingIdentity& identity, absl::string_view detail,
                       absl::string_view image_bytes) {
  std::string stream;
  AppendField(&stream, "tandem.image-embedding/v1");
  AppendField(&stream, identity.weights_fingerprint);
  AppendField(&stream, identity.preprocess_version);
  AppendField(&stream, detail);
  // The bytes' digest, not the bytes: an image (up to tens of MB) is hashed where it lies
  // instead of being copied into the stream.
  AppendField(&stream, security::Sha256(image_bytes));
  return security::Sha256Hex(stream);
}

}  // namespace tandem::encoder
