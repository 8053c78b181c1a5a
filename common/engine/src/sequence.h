#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tandem/engine/block_manager.h"
#include "tandem/engine/engine.h"
#include "tandem/engine/sampling.h"

namespace tandem::engine {

// Lower-tier blocks being copied into a sequence's pool blocks (its table holds the device prefix
// followed by the fetch targets).
struct TierFetch {
  std::future<kv::FetchResult> done;
  int device_blocks = 0;
  std::vector<kv::KvTier> tiers;  // source of each fetched block, in chain order
  std::chrono::steady_clock::time_point started;
};

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
  kv::TrafficClass traffic_class = kv::TrafficClass::kChat;
  bool tiers_looked_up = false;  // one lower-tier lookup per admission attempt
  std::unique_ptr<TierFetch> fetch;  // set while in Engine::fetching_
  int fetched_host_blocks = 0;       // delivered by the last lower-tier fetch
  int fetched_disk_blocks = 0;
  std::vector<InputImage> images;  // in position order

  int num_remaining() const { return static_cast<int>(tokens.size()) - num_computed; }
  int num_generated() const { return static_cast<int>(tokens.size()) - prompt_len; }
  std::span<const std::int32_t> prompt() const { return {tokens.data(), tokens.data() + prompt_len}; }
  std::span<const std::int32_t> generated() const {
    return {tokens.data() + prompt_len, tokens.data() + tokens.size()};
  }
};

}  // namespace tandem::engine
