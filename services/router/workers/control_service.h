#pragma once

#include "tandem/v1/router_control.grpc.pb.h"
#include "workers/prefix_router.h"
#include "workers/worker_registry.h"

namespace tandem::router {

// tandem.v1.RouterControl: how workers join (RegisterWorker), stay (Heartbeat), leave
// (DeregisterWorker, after their drain) and tell the router
// what their KV caches hold (PublishKvEvents, into the PrefixRouter's index).
class ControlService final : public v1::RouterControl::Service {
 public:
  ControlService(WorkerRegistry* registry, PrefixRouter* prefix_router)
      : registry_(registry), prefix_router_(prefix_router) {}

  grpc::Status RegisterWorker(grpc::ServerContext* context,
                              const v1::RegisterWorkerRequest* request,
                              v1::RegisterWorkerResponse* response) override;
  // A heartbeat whose load says draining takes the worker out of placement at once (not down).
  grpc::Status Heartbeat(grpc::ServerContext* context, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  // Forgets that incarnation (a newer one under the same id stays) and deletes its series. OK
  // either way: a stale or repeated deregistration has nothing left to do.
  grpc::Status DeregisterWorker(grpc::ServerContext* context,
                                const v1::DeregisterWorkerRequest* request,
                                v1::DeregisterWorkerResponse* response) override;
  // Answers every batch with an ack: the last applied seq, and resend_snapshot after a gap.
  grpc::Status PublishKvEvents(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::KvEventAck, v1::KvEventBatch>* stream) override;

 private:
  WorkerRegistry* registry_;
  PrefixRouter* prefix_router_;
};

}  // namespace tandem::router
