// A Mooncake-format trace as tandem-sim reads it: ReadTrace's line parsing (malformed lines are
// skipped with a reason), then the infinite-cache pass every report starts with. Input: a byte
// choosing the block size, then the trace text.
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>

#include "fuzz_util.h"
#include "trace.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  static constexpr int kBlockSizes[] = {1, 2, 16, 512};
  const int block_size = kBlockSizes[data[0] % 4];
  std::istringstream in(std::string(tandem::fuzz::AsText(data + 1, size - 1)));
  const tandem::sim::Trace trace = tandem::sim::ReadTrace(in, block_size);
  for (std::size_t i = 0; i < trace.requests.size(); ++i) {
    const auto& r = trace.requests[i];
    if (r.input_length < 0 || r.output_length < 0 || !std::isfinite(r.arrival_seconds)) {
      __builtin_trap();
    }
    if (i > 0 && r.arrival_seconds < trace.requests[i - 1].arrival_seconds) __builtin_trap();
  }
  const auto misses = tandem::sim::InfiniteCacheMisses(trace, block_size);
  const double rate = tandem::sim::HitRateGivenMisses(trace, misses);
  if (std::isnan(rate)) __builtin_trap();
  return 0;
}
