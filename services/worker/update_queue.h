#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

#include "tandem/serving/engine_loop.h"

namespace tandem::worker {

// Hands a request's updates from the engine thread to the RPC thread that streams them. Unbounded
// on purpose: the engine thread must never block on a slow client; a request's total size is
// bounded by its max_tokens.
class UpdateQueue {
 public:
  void Push(const serving::RequestUpdate& update) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      updates_.push_back(update);
    }
    cv_.notify_one();
  }

  // Everything queued so far, waiting up to `timeout` for the first update.
  std::vector<serving::RequestUpdate> PopAll(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return !updates_.empty(); });
    std::vector<serving::RequestUpdate> out(std::make_move_iterator(updates_.begin()),
                                            std::make_move_iterator(updates_.end()));
    updates_.clear();
    return out;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<serving::RequestUpdate> updates_;
};

}  // namespace tandem::worker
