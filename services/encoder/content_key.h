#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace tandem::encoder {

// What decides an image's embedding rows besides its bytes. A change to any of them must give
// another key, or a cache would hand out rows of other weights or another preprocessing.
struct EncodingIdentity {
  std::string weights_fingerprint;  // the vision tower's weights and config
  std::string preprocess_version;   // resize/pad geometry and pixel pipeline
};

// Hex SHA-256 over a domain tag, the identity, the detail level and the SHA-256 of the original
// bytes, each length-prefixed so that no two different inputs share the hashed stream.
std::string ContentKey(const EncodingIdentity& identity, absl::string_view detail,
                       absl::string_view image_bytes);

}  // namespace tandem::encoder
