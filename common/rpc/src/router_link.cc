#include "tandem/rpc/router_link.h"

#include <algorithm>

#include "grpcpp/create_channel.h"
#include "tandem/rpc/conversions.h"

namespace tandem::rpc {

RouterLink::RouterLink(std::string router_address, v1::WorkerInfo info, int heartbeat_ms,
                       LoadFn load, KvSync kv_sync, const security::TlsConfig& tls)
    : router_address_(std::move(router_address)),
      info_(std::move(info)),
      heartbeat_ms_(heartbeat_ms),
      load_(std::move(load)),
      kv_sync_(std::move(kv_sync)),
      stub_(v1::RouterControl::NewStub(
          security::CreateChannel(router_address_, tls))),
      thread_([this] { Run(); }) {}

RouterLink::~RouterLink() { Stop(); }

void RouterLink::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool RouterLink::SleepFor(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, d, [&] { return stopping_ || wake_; });
  wake_ = false;
  return !stopping_;
}

void RouterLink::HeartbeatNow() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_ = true;
  }
  cv_.notify_all();
}

bool RouterLink::Deregister(const std::string& reason) {
  Stop();  // no heartbeat may re-register us after this
  if (!registered_.load()) return false;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  v1::DeregisterWorkerRequest req;
  req.set_worker_id(info_.worker_id());
  req.set_incarnation(info_.incarnation());
  req.set_reason(reason);
  v1::DeregisterWorkerResponse resp;
  const grpc::Status status = stub_->DeregisterWorker(&ctx, req, &resp);
  registered_ = false;
  return status.ok();
}

bool RouterLink::Register() {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  v1::RegisterWorkerRequest req;
  *req.mutable_version() = rpc::CurrentVersion();
  *req.mutable_worker() = info_;
  v1::RegisterWorkerResponse resp;
  if (!stub_->RegisterWorker(&ctx, req, &resp).ok()) return false;
  if (resp.heartbeat_interval_ms() > 0) heartbeat_ms_ = static_cast<int>(resp.heartbeat_interval_ms());
  // A (re-)registration starts the router's view of us from scratch.
  if (kv_sync_.resend_snapshot) kv_sync_.resend_snapshot();
  return true;
}

bool RouterLink::Heartbeat() {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  v1::HeartbeatRequest req;
  req.set_worker_id(info_.worker_id());
  req.set_incarnation(info_.incarnation());
  *req.mutable_load() = load_();
  if (kv_sync_.last_event_seq) req.set_last_kv_event_seq(kv_sync_.last_event_seq());
  v1::HeartbeatResponse resp;
  if (!stub_->Heartbeat(&ctx, req, &resp).ok()) return false;
  if (resp.resend_kv_snapshot() && kv_sync_.resend_snapshot) kv_sync_.resend_snapshot();
  return !resp.reregister();
}

void RouterLink::Run() {
  auto backoff = std::chrono::milliseconds(100);
  for (;;) {
    if (!registered_.load()) {
      if (Register()) {
        registered_ = true;
        backoff = std::chrono::milliseconds(100);
      } else {
        if (!SleepFor(backoff)) return;
        backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
        continue;
      }
    }
    if (!SleepFor(std::chrono::milliseconds(heartbeat_ms_))) return;
    if (!Heartbeat()) registered_ = false;
  }
}

}  // namespace tandem::rpc
