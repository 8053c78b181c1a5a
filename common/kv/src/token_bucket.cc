#include "tandem/kv/token_bucket.h"

#include <algorithm>

namespace tandem::kv {

TokenBucket::TokenBucket(std::uint64_t rate_bytes_per_s, std::uint64_t burst_bytes,
                         std::int64_t now_ms)
    : rate_per_ms_(static_cast<double>(rate_bytes_per_s) / 1000.0),
      burst_(static_cast<double>(burst_bytes)),
      tokens_(static_cast<double>(burst_bytes)),
      last_ms_(now_ms) {}

void TokenBucket::Refill(std::int64_t now_ms) {
  // A clock that steps back (NTP) must not mint or destroy tokens.
  if (now_ms > last_ms_) {
    tokens_ = std::min(burst_, tokens_ + rate_per_ms_ * static_cast<double>(now_ms - last_ms_));
    last_ms_ = now_ms;
  }
}

bool TokenBucket::TryTake(std::uint64_t bytes, std::int64_t now_ms) {
  Refill(now_ms);
  const double want = static_cast<double>(bytes);
  // Oversized requests would otherwise never pass; grant them from a full bucket only.
  if (want <= tokens_ || (want > burst_ && tokens_ >= burst_)) {
    tokens_ -= want;
    return true;
  }
  return false;
}

double TokenBucket::available(std::int64_t now_ms) {
  Refill(now_ms);
  return tokens_;
}

}  // namespace tandem::kv
