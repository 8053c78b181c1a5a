#pragma once

#include <memory>
#include <string>

#include "grpcpp/create_channel.h"
#include "workers/worker_registry.h"

namespace tandem::router::testing {

// A registry entry for routing-only tests: a worker the router can choose but never calls (its
// channel points at a closed port).
inline std::shared_ptr<WorkerEntry> UnconnectedWorker(const std::string& id, v1::WorkerRole role) {
  v1::WorkerInfo info;
  info.set_worker_id(id);
  info.set_role(role);
  info.set_incarnation(1);
  return std::make_shared<WorkerEntry>(
      info, grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials()));
}

}  // namespace tandem::router::testing
