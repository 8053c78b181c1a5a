#include "encoder_config.h"

namespace tandem::encoder {

void BindEncoderFlags(config::FlagSet* f, EncoderConfig* c) {
  f->String("model", &c->model, "vision tower directory (config.json + safetensors)",
            "TANDEM_MODEL");
  f->String("served-model-name", &c->served_model_name,
            "the model name the router serves (the text model these images are for)",
            "TANDEM_SERVED_MODEL_NAME");
  f->String("listen", &c->listen, "gRPC listen address host:port (port 0: ephemeral)",
            "TANDEM_LISTEN");
  f->String("advertise-host", &c->advertise_host, "host the router and workers use to reach us",
            "TANDEM_ADVERTISE_HOST");
  f->String("router", &c->router, "router control address host:port (empty: standalone)",
            "TANDEM_ROUTER");
  f->String("worker-id", &c->worker_id, "encoder id (default: encoder-<incarnation>)",
            "TANDEM_WORKER_ID");
  f->String("metrics-listen", &c->metrics_listen,
            "HTTP address for /metrics, /live, /ready and /drain (empty: off)",
            "TANDEM_METRICS_LISTEN");
  f->String("port-file", &c->port_file,
            "write \"GRPC_PORT METRICS_PORT\" to this file once serving", "TANDEM_PORT_FILE");
  f->Int("threads", &c->threads, "compute threads (0: all cores)", "TANDEM_THREADS");
  f->String("cpu-isa", &c->cpu_isa,
            "CPU kernels: auto (the best this CPU runs), generic, avx2 or avx512",
            "TANDEM_CPU_ISA");
  f->Int("cache-mb", &c->cache_mb, "MiB of image rows kept for reuse", "TANDEM_ENCODER_CACHE_MB");
  f->Int("lease-ms", &c->lease_ms, "how long rows stay pinned for the prefill to fetch them",
         "TANDEM_ENCODER_LEASE_MS");
  f->Int("max-concurrent-encodes", &c->max_concurrent_encodes, "tower runs at once",
         "TANDEM_ENCODER_MAX_CONCURRENT");
  f->Int("max-waiting-encodes", &c->max_waiting_encodes,
         "images that may wait for the tower before new ones are refused",
         "TANDEM_ENCODER_MAX_WAITING");
  f->Int("max-image-mb", &c->max_image_mb, "largest encoded image accepted, MiB",
         "TANDEM_ENCODER_MAX_IMAGE_MB");
  f->Int("heartbeat-ms", &c->heartbeat_ms, "heartbeat interval to the router",
         "TANDEM_HEARTBEAT_MS");
  f->Int("drain-timeout-ms", &c->drain_timeout_ms,
         "on SIGTERM, how long in-flight images may finish before exiting",
         "TANDEM_DRAIN_TIMEOUT_MS");
  f->String("generation", &c->generation, "rollout generation reported to the router",
            "TANDEM_GENERATION");
  security::BindTlsFlags(f, &c->tls, "TANDEM_");
}

}  // namespace tandem::encoder
