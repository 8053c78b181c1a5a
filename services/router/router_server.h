#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "admission/tenant_limits.h"
#include "api/endpoints/generation_api.h"
#include "api/endpoints/protocol_api.h"
#include "api/http/auth.h"
#include "async/executor.h"
#include "async/task_group.h"
#include "dispatch/dispatcher.h"
#include "grpcpp/server.h"
#include "router_config.h"
#include "router_metrics.h"
#include "tandem/http/server.h"
#include "tandem/metrics/registry.h"
#include "workers/worker_registry.h"
#include "workers/worker_selector.h"

namespace tandem::router {

// A running router: the RouterControl gRPC server workers register with, the OpenAI HTTP server,
// and the lease sweeper. Everything a process needs except flags, tokenizer loading and signals,
// so tests run the real thing in-process.
class RouterServer {
 public:
  struct Options {
    RouterConfig config;
    std::string served_model;
    TokenizerSetup tokenizer;  // must outlive the server
    SteadyNow now;             // lease clock; empty: steady_clock
    SteadyNow limits_now;      // the per-key limits' clock; empty: steady_clock
  };
  static absl::StatusOr<std::unique_ptr<RouterServer>> Start(Options options);
  ~RouterServer();

  int http_port() const { return http_port_; }
  int control_port() const { return control_port_; }
  int metrics_port() const { return metrics_port_; }  // --metrics-listen's; 0 without
  // Re-reads --api-keys-file (SIGHUP): new keys and limits apply to the next request, running
  // ones finish. On an error the keys in force stay. FailedPrecondition without the flag.
  absl::Status ReloadApiKeys();
  WorkerRegistry& registry() { return *registry_; }
  PrefixRouter& prefix_router() { return *prefix_router_; }
  const metrics::Registry& metrics_registry() const { return metrics_registry_; }
  int active_requests() const { return admission_ == nullptr ? 0 : admission_->active(); }
  // The drain's first step (SIGTERM): /ready fails so the load balancer stops sending; requests
  // that still arrive are served. Idempotent.
  void BeginDrain();
  // BeginDrain, then waits until no generation is in flight (queued or running), the deadline,
  // or `interrupted()` (called between looks; it may block briefly). True when none is left.
  bool Drain(std::chrono::steady_clock::time_point deadline,
             const std::function<bool()>& interrupted);
  bool draining() const { return draining_.load(); }

  // Lets generations finish for up to `grace`, cancels the rest, then stops both servers and
  // joins every thread. Idempotent.
  void Shutdown(absl::Duration grace);

 private:
  explicit RouterServer(Options options);
  absl::Status Init();
  void SweepLeases();

  Options options_;
  // First, so that they go last: everything below may still post to them while it is destroyed.
  std::unique_ptr<async::Executor> executor_;
  std::unique_ptr<async::TaskGroup> jobs_;
  metrics::Registry metrics_registry_;
  RouterMetrics metrics_;
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<PrefixRouter> prefix_router_;
  std::unique_ptr<PolicySelector> selector_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<Admission> admission_;
  std::unique_ptr<GenerationApi> generation_;
  std::unique_ptr<ProtocolApi> protocols_;
  TrafficClassifier traffic_;
  std::unique_ptr<ApiKeyAuth> auth_;
  std::unique_ptr<TenantLimits> limits_;
  std::unique_ptr<http::Server> ops_server_;
  int metrics_port_ = 0;
  std::unique_ptr<grpc::Service> control_service_;
  std::unique_ptr<grpc::Server> control_server_;
  std::unique_ptr<http::Server> http_server_;
  int http_port_ = 0;
  int control_port_ = 0;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> draining_{false};
  std::thread sweeper_;
};

}  // namespace tandem::router
