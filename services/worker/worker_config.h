#pragma once

#include <cstdint>
#include <string>

#include "kv_tiers.h"
#include "tandem/config/flags.h"
#include "tandem/security/tls.h"
#include "tandem/v1/common.pb.h"

namespace tandem::worker {

struct WorkerConfig {
  v1::WorkerRole role = v1::WORKER_ROLE_COMBINED;
  std::string model;                 // checkpoint directory
  std::string served_model_name;     // default: the directory's name
  std::string listen = "127.0.0.1:0";  // gRPC address; port 0 picks a free port
  std::string advertise_host = "127.0.0.1";  // host the router and peers dial
  std::string router;                // router control address; empty: run standalone
  std::string worker_id;             // default: role-<incarnation hex>, new per start
  std::string metrics_listen = "127.0.0.1:0";  // HTTP /metrics and /health; empty: off
  std::string port_file;             // when set, "GRPC_PORT METRICS_PORT" is written here
  int threads = 0;                   // compute threads (0: all cores)
  std::string cpu_isa = "auto";      // kernels::ParseCpuIsa; auto: the best this CPU runs
  std::string bf16_matmul = "auto";  // kernels::ParseAvailableBf16MatMul / AutoBf16MatMul
  int block_size = 16;
  std::int64_t kv_cache_mb = 256;
  int max_num_seqs = 64;
  int max_batch_tokens = 2048;
  int max_in_flight = 256;           // beyond: RESOURCE_EXHAUSTED (router answers 429)
  bool prefix_caching = true;
  int heartbeat_ms = 1000;
  int handoff_lease_ms = 10000;      // KV reserved for a handoff is reclaimed after this
  std::string ucx_transports;        // UCX_TLS syntax; empty: UCX default
  std::string ucx_port_range;        // "LO-HI": UCX's TCP listening ports; empty: any
  std::string encoder_tls_server_name;  // name in encoders' certificates; empty: the dialled host
  std::string generation;            // rollout generation reported to the router and in build info
  // How long a drain (SIGTERM, /drain) waits for in-flight work before the worker exits anyway.
  // 25 s fits Kubernetes' default 30 s termination grace period with room to deregister.
  int drain_timeout_ms = 25000;
  KvTierConfig kv_tiers;             // host/disk tiers below the device pool (--kv-*)
  security::TlsConfig tls;           // mutual TLS of the control plane (--tls-*)
};

// Binds every field to a flag with a TANDEM_* environment fallback.
void BindWorkerFlags(config::FlagSet* flags, WorkerConfig* config);

}  // namespace tandem::worker
