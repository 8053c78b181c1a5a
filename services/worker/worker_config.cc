#include "worker_config.h"

#include <string>

#include "tandem/kernels/backend.h"

namespace tandem::worker {

void BindWorkerFlags(config::FlagSet* f, WorkerConfig* c) {
  f->String("model", &c->model, "checkpoint directory (llama2.c or Hugging Face)", "TANDEM_MODEL");
  f->String("served-model-name", &c->served_model_name, "model name reported to the router",
            "TANDEM_SERVED_MODEL_NAME");
  f->String("listen", &c->listen, "gRPC listen address host:port (port 0: ephemeral)",
            "TANDEM_LISTEN");
  f->String("advertise-host", &c->advertise_host, "host the router and peers use to reach us",
            "TANDEM_ADVERTISE_HOST");
  f->String("router", &c->router,
            "router control address(es) host:port[,host:port...]; a name with several addresses "
            "(a headless Service) is every router replica, re-resolved every 5 s (empty: standalone)",
            "TANDEM_ROUTER");
  f->String("worker-id", &c->worker_id, "worker id; set it to keep one id across restarts (default: role-<incarnation>)",
            "TANDEM_WORKER_ID");
  f->String("metrics-listen", &c->metrics_listen,
            "HTTP address for /metrics, /live, /ready and /drain (port 0: ephemeral; empty: off)",
            "TANDEM_METRICS_LISTEN");
  f->String("port-file", &c->port_file,
            "write \"GRPC_PORT METRICS_PORT\" to this file once serving", "TANDEM_PORT_FILE");
  f->Int("threads", &c->threads, "compute threads (0: all cores)", "TANDEM_THREADS");
  f->String("cpu-isa", &c->cpu_isa,
            "CPU kernels: auto (the best this CPU runs), generic, avx2 or avx512",
            "TANDEM_CPU_ISA");
  f->String("bf16-matmul", &c->bf16_matmul, std::string(kernels::kBf16MatMulFlagHelp),
            "TANDEM_BF16_MATMUL");
  f->Int("block-size", &c->block_size, "tokens per KV block", "TANDEM_BLOCK_SIZE");
  f->Int64("kv-cache-mb", &c->kv_cache_mb, "KV pool size in MiB", "TANDEM_KV_CACHE_MB");
  f->Int("max-num-seqs", &c->max_num_seqs, "sequences batched per step", "TANDEM_MAX_NUM_SEQS");
  f->Int("max-batch-tokens", &c->max_batch_tokens, "tokens per step (chunked prefill budget)",
         "TANDEM_MAX_BATCH_TOKENS");
  f->Int("max-in-flight", &c->max_in_flight, "requests admitted before RESOURCE_EXHAUSTED",
         "TANDEM_MAX_IN_FLIGHT");
  f->Bool("prefix-caching", &c->prefix_caching, "reuse KV blocks of shared prefixes",
          "TANDEM_PREFIX_CACHING");
  f->Int("heartbeat-ms", &c->heartbeat_ms, "heartbeat interval to the router",
         "TANDEM_HEARTBEAT_MS");
  f->Int("handoff-lease-ms", &c->handoff_lease_ms,
         "KV blocks reserved for a handoff are reclaimed after this", "TANDEM_HANDOFF_LEASE_MS");
  f->String("ucx-transports", &c->ucx_transports, "UCX transports (UCX_TLS syntax)",
            "TANDEM_UCX_TRANSPORTS");
  f->String("ucx-port-range", &c->ucx_port_range,
            "TCP ports UCX listens on for KV peers, LO-HI (open exactly these to the other "
            "workers in the network policy); empty: any free port",
            "TANDEM_UCX_PORT_RANGE");
  f->String("encoder-tls-server-name", &c->encoder_tls_server_name,
            "name the encoders' TLS certificates carry (image rows are fetched from them); "
            "empty: the host dialled",
            "TANDEM_ENCODER_TLS_SERVER_NAME");
  f->String("generation", &c->generation,
             "rollout generation (e.g. the image tag), reported to the router and in "
             "tandem_worker_build_info",
             "TANDEM_GENERATION");
  f->Int("drain-timeout-ms", &c->drain_timeout_ms,
         "on SIGTERM or /drain: longest wait for in-flight requests and KV handoffs before "
         "exiting (keep it below the orchestrator's grace period)",
         "TANDEM_DRAIN_TIMEOUT_MS");
  BindKvTierFlags(f, &c->kv_tiers);
  security::BindTlsFlags(f, &c->tls, "TANDEM_");
}

}  // namespace tandem::worker
