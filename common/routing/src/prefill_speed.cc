#include "tandem/routing/prefill_speed.h"

#include <algorithm>

namespace tandem::routing {
namespace {

// The samples' lengths must spread by this coefficient of variation before the fit separates a
// fixed part: below it the slope is noise over a narrow range of lengths.
constexpr double kMinLengthSpread = 0.25;

}  // namespace

void PrefillSpeedFit::Add(double tokens, double seconds) {
  if (!(tokens > 0) || !(seconds > 0)) return;
  if (!seeded_) {
    seeded_ = true;
    mean_tokens_ = tokens;
    mean_seconds_ = seconds;
    mean_tokens_sq_ = tokens * tokens;
    mean_tokens_seconds_ = tokens * seconds;
  } else {
    mean_tokens_ += alpha_ * (tokens - mean_tokens_);
    mean_seconds_ += alpha_ * (seconds - mean_seconds_);
    mean_tokens_sq_ += alpha_ * (tokens * tokens - mean_tokens_sq_);
    mean_tokens_seconds_ += alpha_ * (tokens * seconds - mean_tokens_seconds_);
  }
  const double variance = mean_tokens_sq_ - mean_tokens_ * mean_tokens_;
  const double covariance = mean_tokens_seconds_ - mean_tokens_ * mean_seconds_;
  const double spread = kMinLengthSpread * mean_tokens_;
  if (variance > spread * spread && covariance > 0) {
    const double slope = covariance / variance;
    const double intercept = mean_seconds_ - slope * mean_tokens_;
    if (intercept >= 0) {
      seconds_per_token_ = slope;
      overhead_seconds_ = intercept;
    } else {
      // Longer prompts cost more than in proportion (attention): no fixed part to take out.
      seconds_per_token_ = mean_tokens_seconds_ / mean_tokens_sq_;
      overhead_seconds_ = 0;
    }
    return;
  }
  // Lengths too alike to fit: the per-token part is what the mean leaves after the fixed part
  // learnt earlier (at most 90% of it, so a worker whose fixed part shrank is not read as free).
  const double fixed = overhead_seconds_ > 0 ? std::min(overhead_seconds_, 0.9 * mean_seconds_) : 0;
  seconds_per_token_ = (mean_seconds_ - fixed) / mean_tokens_;
}

}  // namespace tandem::routing
