#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "tandem/config/flags.h"
#include "tandem/config/service_main.h"
#include "tandem/security/tls.h"

namespace tandem::router {

struct RouterConfig {
  std::string http_listen = "127.0.0.1:8000";     // port 0: ephemeral
  std::string control_listen = "127.0.0.1:50051";  // gRPC RouterControl; port 0: ephemeral
  std::string port_file;          // "http_port control_port", written atomically once listening
  std::string model;              // checkpoint directory; the router only reads its tokenizer
  std::string served_model_name;  // default: the model directory's name
  std::string chat_format = "auto";
  std::string api_key_traffic_classes;  // "key=agent,key=chat": KV retention class per API key  // plain, deepseek-v4, deepseek-v4.1, auto (from config.json)
  int request_timeout_ms = 600000;
  int max_in_flight = 512;        // generations out on workers at once; beyond, they queue
  int max_queue_length = 4096;    // queued beyond max_in_flight; beyond: 429 with Retry-After
  int max_queue_wait_ms = 30000;  // refuse (429) when the predicted queue wait exceeds it
  int max_migrations = 3;         // resumptions of one generation after lost workers
  // On SIGTERM: readiness fails at once, requests still arriving are served, and the router exits
  // once no generation is in flight or after this long (what is left is cancelled).
  int drain_timeout_ms = 45000;
  int worker_lease_ms = 3000;     // no heartbeat within it: the worker is down
  int kv_block_size = 16;         // workers with another block size are refused
  std::string kv_hash_scheme = "chained-fnv1a-splitmix64/v1";  // and another hash scheme
  std::string routing_policy = "tandem";  // tandem::routing::MakePolicy names
  std::int64_t routing_index_blocks = std::int64_t{1} << 20;  // KV prefix index bound
  int prefill_hold_depth = 1;         // tandem policy: prefills out per prefill worker; 0: no hold
  double prefill_hold_aging = 0.1;    // seconds of priority a held prefill gains per second
  int prefill_batch_tokens = -1;      // held prefills fitting this go out together; -1: worker's
  bool held_moves = true;             // tandem policy: idle prefill workers take held prefills over
  double prefill_piece_seconds = 0.5;  // tandem policy: long prompts go in pieces of this (0: off)
  bool warm_ups = true;               // tandem policy: hot prefixes copied to idle prefill workers
  int http_io_threads = 4;
  // Threads of the event loop that runs every generation (they never block; 0: one per core).
  int generation_threads = 0;
  int http_max_connections = 16384;  // open client connections; beyond: 503 (mind ulimit -n)
  std::int64_t max_body_bytes = 8 << 20;
  int header_timeout_ms = 10000;  // slow-loris bound: headers must arrive within it
  // Security (docs/security.md).
  std::string api_keys_file;   // JSON lines of hashed keys; empty: no authentication
  std::string metrics_listen;  // own listener for /metrics, /health, /ready; empty: on http-listen
  // Prefix cache between tenants: tenant (never shared), shared, auto (tenant with API keys).
  std::string prefix_cache_isolation = "auto";
  // Hosts image URLs may be fetched from ("a.example.com", ".example.com" for its subdomains),
  // comma-separated; empty: image URLs are refused (only data: URLs are read).
  std::string image_url_allowlist;
  int image_fetch_concurrency = 8;  // requests with image URLs prepared at once, off I/O threads
  security::TlsConfig tls;     // mutual TLS of the control plane (--tls-*)
};

// Binds every field to a flag with a TANDEM_ROUTER_* environment fallback.
void BindRouterFlags(config::FlagSet* flags, RouterConfig* config);

using config::HostPort;
using config::ParseHostPort;

// The model name clients must use: --served-model-name, else the model directory's basename.
std::string ServedModelName(const RouterConfig& config);

}  // namespace tandem::router
