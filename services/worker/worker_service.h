#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "generate_stream.h"
#include "image_rows_fetcher.h"
#include "kv_handoff.h"
#include "tandem/kv/types.h"
#include "tandem/serving/engine_loop.h"
#include "tandem/v1/worker.grpc.pb.h"
#include "update_queue.h"
#include "worker_config.h"

namespace tandem::worker {

// The tandem.v1.Worker service over one EngineLoop. Generate streams run on gRPC's callback API
// (GenerateStream: no thread per stream; a slow client never stalls the engine); the unary calls
// run on the sync-server threads.
class WorkerService final : public v1::Worker::WithCallbackMethod_Generate<v1::Worker::Service> {
 public:
  // `receiver` is set on decode workers, `sender` on prefill workers (either may be null).
  WorkerService(const WorkerConfig& config, serving::EngineLoop* loop, KvReceiver* receiver,
                KvSender* sender);

  grpc::Status ReserveKv(grpc::ServerContext* context, const v1::ReserveKvRequest* request,
                         v1::ReserveKvResponse* response) override;
  grpc::Status Prefill(grpc::ServerContext* context, const v1::PrefillRequest* request,
                       v1::PrefillResponse* response) override;
  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override;
  grpc::Status Cancel(grpc::ServerContext* context, const v1::CancelRequest* request,
                      v1::CancelResponse* response) override;
  grpc::Status Health(grpc::ServerContext* context, const v1::HealthRequest* request,
                      v1::HealthResponse* response) override;

  v1::WorkerLoad CurrentLoad() const;  // carries draining()
  int active_streams() const { return active_streams_.load(); }
  // ReserveKv, Prefill and Generate calls between arrival and return. A drain waits for zero:
  // a Prefill returns only after its KV handoff was written and flushed, so this also covers
  // the handoffs this worker started.
  int rpcs_in_flight() const { return rpcs_in_flight_.load(); }
  // From now on CurrentLoad() tells the router not to send new work. New work that still arrives
  // (a router that has not heard yet) is refused with kDrainingTrailer and placed elsewhere.
  void SetDraining() { draining_.store(true); }
  bool draining() const { return draining_.load(); }
  std::int64_t requests_while_draining_total() const { return requests_while_draining_.load(); }
  std::int64_t drain_refusals_total() const { return drain_refusals_.load(); }
  std::int64_t cancelled_total() const { return cancelled_total_.load(); }
  std::uint64_t kv_sent_bytes_total() const { return kv_sent_bytes_total_.load(); }

 private:
  absl::StatusOr<kv::TrafficClass> TrafficClassOf(const std::string& name) const;
  // Validates a Generate and hands it to the engine (or completes its KV handoff).
  absl::Status SubmitGenerate(const v1::GenerateRequest& request, serving::UpdateSink sink);

  const WorkerConfig config_;
  const kv::TrafficClass default_class_;
  serving::EngineLoop* loop_;
  KvReceiver* receiver_;
  KvSender* sender_;
  ImageRowsFetcher images_;
  // New work (not the Generate that completes a handoff reserved earlier) arriving mid-drain is
  // refused with kDrainingTrailer (the router places it elsewhere); true when it was.
  bool RefuseIfDraining(grpc::ServerContextBase* context, grpc::Status* refusal);
  // Prefill's warm-up form: the prompt into the prefix cache, nothing held or sent.
  grpc::Status WarmUp(grpc::ServerContext* context, const v1::PrefillRequest* request,
                      v1::PrefillResponse* response);
  // The call's answer when its images could not be resolved; rows lost on the way (ImageRowsLost)
  // carry rpc::kImageRowsNeededTrailer, so the router encodes them again rather than taking this
  // worker for lost.
  grpc::Status ImagesFailed(grpc::ServerContextBase* context, const absl::Status& status);
  // New work accepted while draining: the gate above makes it zero; counted after the gate so
  // that a test can tell.
  void CountIfDraining();

  std::atomic<int> active_streams_{0};
  std::atomic<int> rpcs_in_flight_{0};
  std::atomic<bool> draining_{false};
  std::atomic<std::int64_t> requests_while_draining_{0};
  std::atomic<std::int64_t> drain_refusals_{0};
  std::atomic<std::int64_t> cancelled_total_{0};
  std::atomic<std::uint64_t> kv_sent_bytes_total_{0};
  // Last member: its thread stops first, while everything a stream touches still exists.
  StreamOutbox outbox_;
};

}  // namespace tandem::worker
