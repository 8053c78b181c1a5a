#pragma once

#include <chrono>
#include <cstddef>

#include "router_metrics.h"

namespace tandem::router {

// Feeds a generation's TTFT and inter-token latency histograms as its tokens arrive.
class TokenLatency {
 public:
  TokenLatency(const RouterMetrics* metrics, std::chrono::steady_clock::time_point arrived)
      : metrics_(metrics), arrived_(arrived) {}

  void Observe(std::size_t tokens) {
    const auto now = std::chrono::steady_clock::now();
    if (metrics_ != nullptr) {
      if (!seen_token_) {
        metrics_->ttft_seconds->Observe(Seconds(now - arrived_));
      } else if (tokens > 0) {
        // Tokens arriving together shared the wait.
        const double per_token = Seconds(now - last_token_) / static_cast<double>(tokens);
        for (std::size_t i = 0; i < tokens; ++i)
          metrics_->inter_token_latency_seconds->Observe(per_token);
      }
    }
    seen_token_ = true;
    last_token_ = now;
  }

 private:
  static double Seconds(std::chrono::steady_clock::duration d) {
    return std::chrono::duration<double>(d).count();
  }

  const RouterMetrics* metrics_;
  const std::chrono::steady_clock::time_point arrived_;
  bool seen_token_ = false;
  std::chrono::steady_clock::time_point last_token_;
};

}  // namespace tandem::router
