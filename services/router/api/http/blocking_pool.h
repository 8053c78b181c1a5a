#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem::router {

// A few threads for work that blocks (an image URL fetch waits on a remote server for up to its
// time limit), so that it never holds one of the HTTP server's I/O threads. Bounded twice: at
// most `threads` tasks run at once and at most `max_queued` wait; beyond that TrySubmit refuses
// and the caller answers at once instead of queueing without bound.
class BlockingPool {
 public:
  BlockingPool(int threads, std::size_t max_queued);
  // Runs what is queued, then joins.
  ~BlockingPool();
  BlockingPool(const BlockingPool&) = delete;
  BlockingPool& operator=(const BlockingPool&) = delete;

  // False (and `task` dropped) when max_queued tasks already wait.
  bool TrySubmit(std::function<void()> task);

 private:
  void Run();

  const std::size_t max_queued_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace tandem::router
