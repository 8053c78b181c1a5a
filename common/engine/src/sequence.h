#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tandem/engine/block_manager.h"
#include "tandem/engine/engine.h"
#include "tandem/engine/sampling.h"

namespace tandem::engine {

// One request inside the engine. tokens = prompt followed by generated tokens; the KV of
// tokens[0, num_computed) is in the pool, and the engine's next work for it is
// tokens[num_computed, tokens.size()) (one token while decoding, more while (re)prefilling).
struct Engine::Sequence {
  std::string id;
  std::vector<std::int32_t> tokens;
  int prompt_len = 0;
  int num_computed = 0;
  int cached_tokens = 0;  // prefix-cache hit on first admission
  bool admitted_before = false;
  bool running = false;
  BlockTable table;
  SamplingParams params;
  bool hold_kv = false;  // keep the blocks after finishing (prefill of a disaggregated request)
  std::uint64_t seed = 0;

  int num_remaining() const { return static_cast<int>(tokens.size()) - num_computed; }
  int num_generated() const { return static_cast<int>(tokens.size()) - prompt_len; }
  std::span<const std::int32_t> prompt() const { return {tokens.data(), tokens.data() + prompt_len}; }
  std::span<const std::int32_t> generated() const {
    return {tokens.data() + prompt_len, tokens.data() + tokens.size()};
  }
};

}  // namespace tandem::engine
