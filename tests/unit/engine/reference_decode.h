#pragma once

// The simplest possible decoding loop, with no paging, batching or scheduling: one contiguous KV
// block, the whole prompt in one chunk, then one token per forward. Engine outputs must equal it.

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tandem/base/hash.h"
#include "tandem/engine/sampling.h"
#include "tandem/model/model.h"

namespace tandem::engine::testing {

inline absl::StatusOr<std::vector<std::int32_t>> ReferenceDecode(
    model::Model& model, std::span<const std::int32_t> prompt, const SamplingParams& params,
    const std::string& request_id) {
  const model::KvLayout layout = model.kv_layout();
  const int capacity = static_cast<int>(prompt.size()) + params.max_tokens;
  std::vector<float> memory(static_cast<std::size_t>(capacity) * layout.num_layers *
                            layout.floats_per_token);
  model::KvStorage kv{memory.data(), 1, capacity, layout.num_layers, layout.floats_per_token};
  const std::vector<std::int32_t> table = {0};
  const std::uint64_t seed =
      params.seed.has_value()
          ? *params.seed
          : StableHash64({reinterpret_cast<const std::uint8_t*>(request_id.data()),
                          request_id.size()},
                         0);
  std::vector<std::int32_t> tokens(prompt.begin(), prompt.end());
  std::vector<std::int32_t> generated;
  int computed = 0;
  while (static_cast<int>(generated.size()) < params.max_tokens) {
    model::SequenceChunk chunk;
    chunk.tokens = std::span<const std::int32_t>(tokens).subspan(computed);
    chunk.start_pos = computed;
    chunk.block_table = table;
    std::vector<float> logits;
    absl::Status s = model.Forward({&chunk, 1}, kv, &logits);
    if (!s.ok()) return s;
    computed = static_cast<int>(tokens.size());
    const std::int32_t next = SampleToken(params, seed, generated.size(),
                                          {prompt, generated}, logits);
    generated.push_back(next);
    tokens.push_back(next);
    const auto& stops = params.stop_token_ids;
    if (std::find(stops.begin(), stops.end(), next) != stops.end()) break;
    if (!params.ignore_eos && next == model.config().eos_token_id) break;
  }
  return generated;
}

}  // namespace tandem::engine::testing
