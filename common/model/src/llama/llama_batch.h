#pragma once

#include <span>

#include "absl/status/status.h"
#include "tandem/model/model.h"

namespace tandem::model::internal {

// Checks a forward batch against the model before anything is written to the cache: token ids
// within the vocabulary, positions within the context, block tables long enough and pointing at
// existing blocks, and a cache laid out for this model. Architecture-independent.
absl::Status ValidateBatch(std::span<const SequenceChunk> batch, const KvStorage& kv,
                           const ModelConfig& config, const KvLayout& layout);

}  // namespace tandem::model::internal
