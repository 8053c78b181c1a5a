#include "control_service.h"

#include <iostream>

#include "tandem/rpc/conversions.h"

namespace tandem::router {

grpc::Status ControlService::RegisterWorker(grpc::ServerContext*,
                                            const v1::RegisterWorkerRequest* request,
                                            v1::RegisterWorkerResponse* response) {
  absl::StatusOr<v1::RegisterWorkerResponse> result = registry_->Register(*request);
  if (!result.ok()) {
    std::cerr << "router: refused worker " << request->worker().worker_id() << ": "
              << result.status().message() << "\n";
    return rpc::ToGrpc(result.status());
  }
  std::cerr << "router: worker " << request->worker().worker_id() << " ("
            << RoleName(request->worker().role()) << ", " << request->worker().model() << " at "
            << request->worker().grpc_endpoint() << ") registered\n";
  *response = std::move(*result);
  return grpc::Status::OK;
}

grpc::Status ControlService::Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                                       v1::HeartbeatResponse* response) {
  *response = registry_->Heartbeat(*request);
  return grpc::Status::OK;
}

}  // namespace tandem::router
