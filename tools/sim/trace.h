#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tandem/routing/types.h"

namespace tandem::sim {

// One request of a Mooncake-format trace, its block ids turned into chained hashes so that equal
// hashes mean equal prefixes (the ids alone only promise equal blocks).
struct TraceRequest {
  double arrival_seconds = 0;
  std::int64_t input_length = 0;
  std::int64_t output_length = 0;
  std::vector<routing::BlockHash> chain;
  int line = 0;  // 1-based line in the trace file
};

struct Trace {
  std::vector<TraceRequest> requests;  // sorted by arrival
  std::vector<std::string> skipped;    // "line N: why" for each malformed line
};

// Reads JSON lines {"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [...]}
// with one id per `block_size` prompt tokens. Malformed lines are reported in `skipped` and left
// out; blank lines are ignored.
Trace ReadTrace(std::istream& in, int block_size);
// NotFound when the file cannot be opened.
absl::StatusOr<Trace> ReadTraceFile(const std::string& path, int block_size);

// Token-weighted hit rate with one infinite cache shared by all workers: the ceiling no placement
// can beat.
double InfiniteCacheHitRate(const Trace& trace, int block_size);
// Per request (trace order): the prompt tokens one infinite cache shared by all workers misses.
std::vector<std::int64_t> InfiniteCacheMisses(const Trace& trace, int block_size);
// The hit rate those misses leave (what InfiniteCacheHitRate computes from them).
double HitRateGivenMisses(const Trace& trace, const std::vector<std::int64_t>& misses);

}  // namespace tandem::sim
