#pragma once

#include <cstdint>

namespace tandem::kv {

// Paces background demotion so that filling the host tier never turns into one burst of disk
// writes. Over any window of T ms at most burst + rate * T / 1000 bytes are granted, provided
// no single request exceeds the burst (an oversized one is granted only from a full bucket and
// leaves it in debt, so the bound then grows by that one request).
class TokenBucket {
 public:
  TokenBucket(std::uint64_t rate_bytes_per_s, std::uint64_t burst_bytes, std::int64_t now_ms);

  // Grants `bytes` and returns true, or returns false and changes nothing.
  bool TryTake(std::uint64_t bytes, std::int64_t now_ms);
  double available(std::int64_t now_ms);

 private:
  void Refill(std::int64_t now_ms);

  double rate_per_ms_;
  double burst_;
  double tokens_;
  std::int64_t last_ms_;
};

}  // namespace tandem::kv
