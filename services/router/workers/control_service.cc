#include "workers/control_service.h"

#include <iostream>

#include "tandem/rpc/conversions.h"

namespace tandem::router {

grpc::Status ControlService::RegisterWorker(grpc::ServerContext*,
                                            const v1::RegisterWorkerRequest* request,
                                            v1::RegisterWorkerResponse* response) {
  if (absl::Status valid = registry_->Validate(*request); !valid.ok()) {
    std::cerr << "router: refused worker " << request->worker().worker_id() << ": "
              << valid.message() << "\n";
    return rpc::ToGrpc(valid);
  }
  // Routing first: once the registry has the worker it is a candidate (and /ready may say so),
  // and a request placed in between would find no routable worker and be refused.
  if (absl::Status st = prefix_router_->OnRegistered(request->worker()); !st.ok()) {
    // Still served by the registry, but routing cannot place requests on it.
    std::cerr << "router: worker " << request->worker().worker_id()
              << " is not routable: " << st.message() << "\n";
  }
  absl::StatusOr<v1::RegisterWorkerResponse> result = registry_->Register(*request);
  if (!result.ok()) return rpc::ToGrpc(result.status());
  std::cerr << "router: worker " << request->worker().worker_id() << " ("
            << RoleName(request->worker().role()) << ", " << request->worker().model() << " at "
            << request->worker().grpc_endpoint() << ") registered\n";
  *response = std::move(*result);
  return grpc::Status::OK;
}

grpc::Status ControlService::Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                                       v1::HeartbeatResponse* response) {
  *response = registry_->Heartbeat(*request);
  if (!response->reregister()) {
    if (request->load().draining()) {
      prefix_router_->OnDraining(request->worker_id(), request->incarnation());
    }
    response->set_resend_kv_snapshot(prefix_router_->OnHeartbeat(*request));
  }
  return grpc::Status::OK;
}

grpc::Status ControlService::DeregisterWorker(grpc::ServerContext*,
                                              const v1::DeregisterWorkerRequest* request,
                                              v1::DeregisterWorkerResponse*) {
  if (registry_->Deregister(request->worker_id(), request->incarnation(), request->reason())) {
    prefix_router_->OnDeregistered(request->worker_id(), request->incarnation());
  } else {
    std::cerr << "router: deregistration of " << request->worker_id() << " incarnation "
              << request->incarnation() << " ignored: not its current registration\n";
  }
  return grpc::Status::OK;
}

grpc::Status ControlService::PublishKvEvents(
    grpc::ServerContext*, grpc::ServerReaderWriter<v1::KvEventAck, v1::KvEventBatch>* stream) {
  v1::KvEventBatch batch;
  while (stream->Read(&batch)) {
    if (!stream->Write(prefix_router_->OnEvents(batch))) break;
  }
  return grpc::Status::OK;
}

}  // namespace tandem::router
