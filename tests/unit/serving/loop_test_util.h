#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "tandem/serving/engine_loop.h"

namespace tandem::serving::testing {

// Collects one request's updates (the loop calls the sink on its thread) and lets the test wait
// for its end.
class Collector {
 public:
  UpdateSink sink() {
    return [this](const RequestUpdate& u) {
      std::lock_guard<std::mutex> lock(mu_);
      tokens_.insert(tokens_.end(), u.new_tokens.begin(), u.new_tokens.end());
      if (u.finished) {
        finished_ = true;
        last_ = u;
      }
      cv_.notify_all();
    };
  }
  bool WaitFinished(std::chrono::seconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return finished_; });
  }
  bool WaitTokens(std::size_t n, std::chrono::seconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return tokens_.size() >= n || finished_; });
  }
  std::vector<std::int32_t> tokens() {
    std::lock_guard<std::mutex> lock(mu_);
    return tokens_;
  }
  RequestUpdate last() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::int32_t> tokens_;
  bool finished_ = false;
  RequestUpdate last_;
};

// Greedy sampling that runs to max_tokens: the outputs tests compare are exact and of known length.
inline engine::SamplingParams Greedy(int max_tokens) {
  engine::SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

}  // namespace tandem::serving::testing
