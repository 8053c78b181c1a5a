#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "dispatch/dispatcher.h"
#include "tandem/image/fetch.h"
#include "tandem/image/limits.h"
#include "tandem/recipe/conversation.h"

namespace tandem::router {

// The images of a conversation, read and checked as deepseek-recipe does (count, bytes, format,
// dimensions; the pixels are the encoder's to decode), each measured in prompt positions, in the
// order their placeholders appear in the rendered prompt. Errors are recipe's, with its location
// prefix. Remote URLs are fetched with `fetcher` (its policy: allow-listed hosts, public addresses
// only), or refused without one. A fetch blocks the calling thread for at most the policy's
// timeout.
absl::StatusOr<std::vector<RequestImage>> TakeImages(const recipe::Conversation& conversation,
                                                     const image::ImageLimits& limits,
                                                     const image::ImageFetcher* fetcher);

// Replaces each image placeholder token of `prompt` (one per image, in order) by the image's
// rows of placeholder ids, and sets each image's position and token id. The ids are negative
// and derived from the image's bytes and detail, so that the prefix cache (router index and
// workers alike, which hash prompt ids) tells two images apart and finds the same image again.
absl::Status ExpandImagePlaceholders(std::int32_t image_token_id, std::vector<std::int32_t>* prompt,
                                     std::vector<RequestImage>* images);

}  // namespace tandem::router
