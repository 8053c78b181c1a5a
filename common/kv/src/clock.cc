#include "tandem/kv/clock.h"

#include <chrono>

namespace tandem::kv {

std::int64_t SystemClock::NowUnixMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace tandem::kv
