#include "router_config.h"

#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tandem::router {

void BindRouterFlags(config::FlagSet* f, RouterConfig* c) {
  f->String("http-listen", &c->http_listen, "OpenAI-compatible HTTP address host:port (port 0: ephemeral)",
            "TANDEM_ROUTER_HTTP_LISTEN");
  f->String("control-listen", &c->control_listen,
            "gRPC RouterControl address host:port where workers register (port 0: ephemeral)",
            "TANDEM_ROUTER_CONTROL_LISTEN");
  f->String("port-file", &c->port_file, "write \"http_port control_port\" here once listening",
            "TANDEM_ROUTER_PORT_FILE");
  f->String("model", &c->model, "checkpoint directory (only its tokenizer is read)",
            "TANDEM_ROUTER_MODEL");
  f->String("served-model-name", &c->served_model_name,
            "model name clients request (default: the model directory's name)",
            "TANDEM_ROUTER_SERVED_MODEL_NAME");
  f->String("chat-format", &c->chat_format,
            "how conversations become prompts: auto (deepseek-v4 when config.json says "
            "model_type deepseek_v4, else plain), plain, deepseek-v4, deepseek-v4.1",
            "TANDEM_ROUTER_CHAT_FORMAT");
  f->String("api-key-traffic-classes", &c->api_key_traffic_classes,
            "KV retention class (chat, agent) per API key, as key=class,key=class; the "
            "X-Tandem-Traffic-Class header overrides it",
            "TANDEM_ROUTER_API_KEY_TRAFFIC_CLASSES");
  f->Int("request-timeout-ms", &c->request_timeout_ms, "deadline of one generation",
         "TANDEM_ROUTER_REQUEST_TIMEOUT_MS");
  f->Int("max-in-flight", &c->max_in_flight,
         "generations out on workers at once (lowered by itself while workers refuse for "
         "capacity); the rest wait in the admission queue",
         "TANDEM_ROUTER_MAX_IN_FLIGHT");
  f->Int("max-queue-length", &c->max_queue_length,
         "requests waiting in the admission queue before new ones get 429 (0: never queue)",
         "TANDEM_ROUTER_MAX_QUEUE_LENGTH");
  f->Int("max-queue-wait-ms", &c->max_queue_wait_ms,
         "a request whose predicted queue wait exceeds this gets 429 with Retry-After; a queued "
         "one the workers keep refusing gives up after waiting this long",
         "TANDEM_ROUTER_MAX_QUEUE_WAIT_MS");
  f->Int("max-migrations", &c->max_migrations,
         "times one generation is resumed on other workers after the one serving it is lost "
         "(died, lease ran out, shut down); beyond, the stream ends with an error event",
         "TANDEM_ROUTER_MAX_MIGRATIONS");
  f->Int("drain-timeout-ms", &c->drain_timeout_ms,
         "on SIGTERM: /ready answers 503 at once (new requests are still served while the load "
         "balancer catches up), and the router exits when no generation is in flight or after "
         "this long, cancelling what is left; keep it below terminationGracePeriodSeconds",
         "TANDEM_ROUTER_DRAIN_TIMEOUT_MS");
  f->Int("worker-lease-ms", &c->worker_lease_ms, "a worker without a heartbeat for this long is down",
         "TANDEM_ROUTER_WORKER_LEASE_MS");
  f->Int("kv-block-size", &c->kv_block_size, "tokens per KV block every worker must use",
         "TANDEM_ROUTER_KV_BLOCK_SIZE");
  f->String("kv-hash-scheme", &c->kv_hash_scheme,
            "KV block hash scheme every worker must announce", "TANDEM_ROUTER_KV_HASH_SCHEME");
  f->String("routing-policy", &c->routing_policy,
            "tandem, round-robin, least-load, power-of-two, sglang-cache-aware or dynamo-cost",
            "TANDEM_ROUTER_ROUTING_POLICY");
  f->Int64("routing-index-blocks", &c->routing_index_blocks,
           "KV blocks the prefix index remembers (least recently used forgotten beyond)",
           "TANDEM_ROUTER_ROUTING_INDEX_BLOCKS");
  f->Int("prefill-hold-depth", &c->prefill_hold_depth,
         "tandem policy: prefills sent to a prefill worker at a time; the rest wait in the router, "
         "shortest predicted first (0: send at once)",
         "TANDEM_ROUTER_PREFILL_HOLD_DEPTH");
  f->Double("prefill-hold-aging", &c->prefill_hold_aging,
            "seconds of priority a held prefill gains per second it waits (bounds its wait)",
            "TANDEM_ROUTER_PREFILL_HOLD_AGING");
  f->Bool("warm-ups", &c->warm_ups,
          "tandem policy: copy a hot prompt prefix onto an idle prefill worker (computed there "
          "alone) once enough requests have queued behind its one holder",
          "TANDEM_ROUTER_WARM_UPS");
  f->Bool("held-moves", &c->held_moves,
          "tandem policy: a prefill worker that falls idle takes over a prefill held for a busy "
          "one, where the wait skipped outweighs the cached prefix it must recompute",
          "TANDEM_ROUTER_HELD_MOVES");
  f->Double("prefill-piece-seconds", &c->prefill_piece_seconds,
            "tandem policy: a prompt whose uncached rest would take more than two of these "
            "seconds on its worker (at its learnt speed) goes as a leading piece of this length "
            "first, then the rest waits its turn again, so shorter prefills held meanwhile pass "
            "it (only while nothing else waits for that worker; 0: whole prompts)",
            "TANDEM_ROUTER_PREFILL_PIECE_SECONDS");
  f->Int("prefill-batch-tokens", &c->prefill_batch_tokens,
         "tandem policy: held prefills whose uncached tokens together fit this go out to their "
         "worker at once and are computed in one engine step (-1: each worker's announced "
         "--max-batch-tokens; 0: one at a time)",
         "TANDEM_ROUTER_PREFILL_BATCH_TOKENS");
  f->Int("generation-threads", &c->generation_threads,
         "threads of the event loop that runs generations (they wait without a thread); 0: one "
         "per core",
         "TANDEM_ROUTER_GENERATION_THREADS");
  f->Int("http-io-threads", &c->http_io_threads, "HTTP I/O threads",
         "TANDEM_ROUTER_HTTP_IO_THREADS");
  f->Int("http-max-connections", &c->http_max_connections,
         "open client connections (streams included); beyond, new ones get 503 and are closed. "
         "Each takes a file descriptor: raise the process's open-file limit to match",
         "TANDEM_ROUTER_HTTP_MAX_CONNECTIONS");
  f->Int64("max-body-bytes", &c->max_body_bytes, "largest request body accepted (413 beyond)",
           "TANDEM_ROUTER_MAX_BODY_BYTES");
  f->Int("header-timeout-ms", &c->header_timeout_ms,
         "time a client has to send the request headers", "TANDEM_ROUTER_HEADER_TIMEOUT_MS");
  f->String("api-keys-file", &c->api_keys_file,
            "API keys, one JSON object per line ({\"key_sha256\", \"tenant\", \"traffic_class\", "
            "\"limits\"}; tools/apikey makes them): every endpoint but /health, /ready and "
            "/v1/models then needs Authorization: Bearer KEY or x-api-key: KEY. Re-read on SIGHUP. "
            "Empty: no authentication",
            "TANDEM_ROUTER_API_KEYS_FILE");
  f->String("metrics-listen", &c->metrics_listen,
            "own address host:port for /metrics, /health and /ready (never authenticated; "
            "/metrics then leaves the public listener). Empty: they are on --http-listen",
            "TANDEM_ROUTER_METRICS_LISTEN");
  f->String("prefix-cache-isolation", &c->prefix_cache_isolation,
            "prefix cache between tenants: tenant (each tenant's prompts hash their KV blocks "
            "under its own salt, so tenants never share or time each other's cached prefixes), "
            "shared, or auto (tenant when --api-keys-file is set). A request's cache_salt field "
            "salts further either way",
            "TANDEM_ROUTER_PREFIX_CACHE_ISOLATION");
  f->String("image-url-allowlist", &c->image_url_allowlist,
            "hosts image URLs may be fetched from (comma-separated; \".example.com\": its "
            "subdomains); only http(s) to public addresses, checked at connect time, 32 MiB and "
            "10 s at most. Empty: image URLs are refused, only data: URLs are read",
            "TANDEM_ROUTER_IMAGE_URL_ALLOWLIST");
  f->Int("image-fetch-concurrency", &c->image_fetch_concurrency,
         "with --image-url-allowlist: requests that may name image URLs are prepared on this "
         "many threads of their own, never on an HTTP I/O thread (a fetch may wait its full "
         "10 s); up to 32 per thread wait, more are answered 503",
         "TANDEM_ROUTER_IMAGE_FETCH_CONCURRENCY");
  security::BindTlsFlags(f, &c->tls, "TANDEM_ROUTER_");
}

std::string ServedModelName(const RouterConfig& config) {
  if (!config.served_model_name.empty()) return config.served_model_name;
  std::filesystem::path path(config.model);
  if (!path.has_filename()) path = path.parent_path();  // "models/x/" names x
  return path.filename().string();
}

}  // namespace tandem::router
