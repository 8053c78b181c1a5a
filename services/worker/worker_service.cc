#include "worker_service.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "tandem/rpc/conversions.h"
#include "update_queue.h"

namespace tandem::worker {
namespace {

using Clock = std::chrono::system_clock;

std::int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
      .count();
}

// Keeps a gauge honest on every exit path of a handler.
class ScopedCount {
 public:
  explicit ScopedCount(std::atomic<int>* c) : c_(c) { c_->fetch_add(1); }
  ~ScopedCount() { c_->fetch_sub(1); }

 private:
  std::atomic<int>* c_;
};

absl::Status ValidateCommon(const v1::ApiVersion& version, const std::string& request_id,
                            int prompt_len) {
  absl::Status st = rpc::CheckVersion(version);
  if (!st.ok()) return st;
  if (request_id.empty()) return absl::InvalidArgumentError("request_id is required");
  if (prompt_len == 0) return absl::InvalidArgumentError("prompt_token_ids is empty");
  return absl::OkStatus();
}

}  // namespace

WorkerService::WorkerService(const WorkerConfig& config, serving::EngineLoop* loop)
    : config_(config), loop_(loop) {}

v1::WorkerLoad WorkerService::CurrentLoad() const {
  const serving::LoopLoad l = loop_->load();
  v1::WorkerLoad out;
  out.set_running_requests(l.running);
  out.set_waiting_requests(l.waiting);
  out.set_free_kv_blocks(l.free_blocks);
  out.set_total_kv_blocks(l.total_blocks);
  return out;
}

grpc::Status WorkerService::ReserveKv(grpc::ServerContext*, const v1::ReserveKvRequest*,
                                      v1::ReserveKvResponse*) {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "KV handoff is not available yet");
}

grpc::Status WorkerService::Prefill(grpc::ServerContext*, const v1::PrefillRequest*,
                                    v1::PrefillResponse*) {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "KV handoff is not available yet");
}

grpc::Status WorkerService::Generate(grpc::ServerContext* context,
                                     const v1::GenerateRequest* request,
                                     grpc::ServerWriter<v1::GenerateResponse>* writer) {
  absl::Status valid = ValidateCommon(request->version(), request->request_id(),
                                      request->prompt_token_ids_size());
  if (!valid.ok()) return rpc::ToGrpc(valid);
  if (!request->handoff_id().empty()) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "KV handoff is not available yet");
  }
  ScopedCount streams(&active_streams_);
  auto queue = std::make_shared<UpdateQueue>();
  std::vector<std::int32_t> prompt(request->prompt_token_ids().begin(),
                                   request->prompt_token_ids().end());
  absl::Status submitted =
      loop_->Submit(request->request_id(), std::move(prompt), rpc::FromProto(request->sampling()),
                    [queue](const serving::RequestUpdate& u) { queue->Push(u); });
  if (!submitted.ok()) return rpc::ToGrpc(submitted);

  const std::int64_t deadline_ms = request->deadline_unix_ms();
  bool cancelled = false;
  grpc::Status outcome = grpc::Status::OK;
  for (;;) {
    std::vector<serving::RequestUpdate> updates = queue->PopAll(std::chrono::milliseconds(20));
    if (!cancelled) {
      if (context->IsCancelled()) {
        cancelled = true;
        outcome = grpc::Status(grpc::StatusCode::CANCELLED, "client cancelled");
      } else if (deadline_ms > 0 && NowUnixMs() > deadline_ms) {
        cancelled = true;
        outcome = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "request deadline passed");
      }
      if (cancelled) loop_->Cancel(request->request_id());
    }
    if (updates.empty()) continue;
    // Coalesce what piled up since the last write into one message.
    v1::GenerateResponse msg;
    bool finished = false;
    for (const serving::RequestUpdate& u : updates) {
      for (std::int32_t t : u.new_tokens) msg.add_token_ids(t);
      if (!u.finished) continue;
      finished = true;
      msg.set_finish_reason(rpc::ToProto(u.finish_reason));
      if (!u.error.empty()) msg.set_error(u.error);
      msg.mutable_usage()->set_prompt_tokens(u.prompt_tokens);
      msg.mutable_usage()->set_completion_tokens(u.completion_tokens);
      msg.mutable_usage()->set_cached_prompt_tokens(u.cached_tokens);
    }
    if (!cancelled && !writer->Write(msg)) {
      // The client is gone: stop the work, then wait for the engine to let go of the request.
      cancelled = true;
      outcome = grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
      loop_->Cancel(request->request_id());
    }
    if (finished) break;
  }
  return outcome;
}

grpc::Status WorkerService::Cancel(grpc::ServerContext*, const v1::CancelRequest* request,
                                   v1::CancelResponse* response) {
  if (request->request_id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "request_id is required");
  }
  loop_->Cancel(request->request_id());
  response->set_found(true);
  return grpc::Status::OK;
}

grpc::Status WorkerService::Health(grpc::ServerContext*, const v1::HealthRequest*,
                                   v1::HealthResponse* response) {
  response->set_serving(true);
  *response->mutable_load() = CurrentLoad();
  return grpc::Status::OK;
}

}  // namespace tandem::worker
