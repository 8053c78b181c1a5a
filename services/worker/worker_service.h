#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "tandem/serving/engine_loop.h"
#include "tandem/v1/worker.grpc.pb.h"
#include "worker_config.h"

namespace tandem::worker {

// The tandem.v1.Worker service over one EngineLoop. Streams run on gRPC's sync-server threads;
// each only waits on its own UpdateQueue, so a slow client never stalls the engine.
class WorkerService final : public v1::Worker::Service {
 public:
  WorkerService(const WorkerConfig& config, serving::EngineLoop* loop);

  grpc::Status ReserveKv(grpc::ServerContext* context, const v1::ReserveKvRequest* request,
                         v1::ReserveKvResponse* response) override;
  grpc::Status Prefill(grpc::ServerContext* context, const v1::PrefillRequest* request,
                       v1::PrefillResponse* response) override;
  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override;
  grpc::Status Cancel(grpc::ServerContext* context, const v1::CancelRequest* request,
                      v1::CancelResponse* response) override;
  grpc::Status Health(grpc::ServerContext* context, const v1::HealthRequest* request,
                      v1::HealthResponse* response) override;

  v1::WorkerLoad CurrentLoad() const;
  int active_streams() const { return active_streams_.load(); }

 private:
  const WorkerConfig config_;
  serving::EngineLoop* loop_;
  std::atomic<int> active_streams_{0};
};

}  // namespace tandem::worker
