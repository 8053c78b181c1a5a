#pragma once

namespace tandem::routing {

// A worker's prefill time learnt as `overhead + tokens x seconds_per_token` from finished
// prefills, by least squares over exponentially weighted moments of (tokens, seconds).
//
// Why not the average of seconds / tokens: every prefill pays a fixed part (scheduling, the
// step's launch, the RPC) whatever its length, so a worker that mostly computes short suffixes
// (an agent's next step behind a cached history) looks two or three times slower per token than
// one that computed a long prompt, although both are the same hardware. A policy that adds its
// own per-request overhead to that ratio counts the fixed part twice and sends work to whichever
// worker last ran a long prompt (docs/routing.md, rule 1).
class PrefillSpeedFit {
 public:
  // `alpha`: the newest sample's weight in the moments (0 < alpha <= 1).
  explicit PrefillSpeedFit(double alpha = 0.2) : alpha_(alpha) {}

  // One finished prefill that computed `tokens` (> 0) in `seconds` (> 0); others are ignored.
  void Add(double tokens, double seconds);

  // 0 before the first sample.
  double seconds_per_token() const { return seconds_per_token_; }
  // < 0 until the samples' lengths have differed enough to separate it from the per-token part.
  double overhead_seconds() const { return overhead_seconds_; }

 private:
  double alpha_;
  bool seeded_ = false;
  double mean_tokens_ = 0;
  double mean_seconds_ = 0;
  double mean_tokens_sq_ = 0;
  double mean_tokens_seconds_ = 0;
  double seconds_per_token_ = 0;
  double overhead_seconds_ = -1;
};

}  // namespace tandem::routing
