#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tandem/http/config.h"
#include "tandem/http/router.h"

namespace tandem::http::internal {

// What the server can ask of a live connection during shutdown.
class Connection {
 public:
  virtual ~Connection() = default;
  // Finish the current exchange (or close now if idle), then close. Thread-safe.
  virtual void Drain() = 0;
  // Cancel any stream and close now. Thread-safe.
  virtual void Abort() = 0;
  // Cancel any stream directly; only once the I/O threads have stopped, since it bypasses the
  // connection's strand. Detaches the stream so producers never touch the I/O context again.
  virtual void CancelStreamAfterStop() = 0;
};

// State shared by the server and its connections; connections keep it alive.
class ServerContext {
 public:
  ServerContext(ServerConfig config, Router router)
      : config(std::move(config)), router(std::move(router)) {}

  const ServerConfig config;
  const Router router;
  std::atomic<bool> draining{false};

  uint64_t Register(std::weak_ptr<Connection> connection);
  void Unregister(uint64_t id);
  size_t connection_count() const;
  // The connections still alive; call their methods without holding any lock of ours.
  std::vector<std::shared_ptr<Connection>> LiveConnections() const;
  // True when the count reached zero before `deadline`.
  bool WaitForNoConnections(absl::Time deadline) const;

 private:
  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, std::weak_ptr<Connection>> connections_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::http::internal
