#include "server_context.h"

namespace tandem::http::internal {

uint64_t ServerContext::Register(std::weak_ptr<Connection> connection) {
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  connections_.emplace(id, std::move(connection));
  return id;
}

void ServerContext::Unregister(uint64_t id) {
  absl::MutexLock lock(&mu_);
  connections_.erase(id);
}

size_t ServerContext::connection_count() const {
  absl::MutexLock lock(&mu_);
  return connections_.size();
}

std::vector<std::shared_ptr<Connection>> ServerContext::LiveConnections() const {
  std::vector<std::shared_ptr<Connection>> live;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, weak] : connections_) {
    if (auto connection = weak.lock()) live.push_back(std::move(connection));
  }
  return live;
}

bool ServerContext::WaitForNoConnections(absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return connections_.empty(); };
  return mu_.AwaitWithDeadline(absl::Condition(&none), deadline);
}

}  // namespace tandem::http::internal
