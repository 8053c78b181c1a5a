#pragma once

#include "tandem/v1/router_control.grpc.pb.h"
#include "worker_registry.h"

namespace tandem::router {

// tandem.v1.RouterControl: how workers join (RegisterWorker) and stay (Heartbeat).
class ControlService final : public v1::RouterControl::Service {
 public:
  explicit ControlService(WorkerRegistry* registry) : registry_(registry) {}

  grpc::Status RegisterWorker(grpc::ServerContext* context,
                              const v1::RegisterWorkerRequest* request,
                              v1::RegisterWorkerResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  // KV events feed prefix-affinity routing, which does not exist yet; the base class answers
  // UNIMPLEMENTED for PublishKvEvents.

 private:
  WorkerRegistry* registry_;
};

}  // namespace tandem::router
