#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "content_key.h"
#include "embedding_cache.h"
#include "tandem/v1/encoder.pb.h"

namespace tandem::encoder {

// Bytes in, rows out: preprocessing, the vision tower and the projector, behind one call so the
// service can be tested without weights. Encode may run on several threads at once.
class ImageEncoder {
 public:
  virtual ~ImageEncoder() = default;
  // What the rows depend on besides the bytes (part of every cache key).
  virtual const EncodingIdentity& identity() const = 0;
  // INVALID_ARGUMENT (with the protocol's message) for an image the intake refuses.
  virtual absl::StatusOr<Embedding> Encode(absl::string_view image_bytes,
                                           v1::ImageDetailLevel detail) = 0;
};

// The spelling of a detail level inside cache keys ("high" for unspecified, as the protocols'
// "auto").
absl::string_view DetailName(v1::ImageDetailLevel detail);

}  // namespace tandem::encoder
