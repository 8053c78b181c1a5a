#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "api/endpoints/generation_api.h"
#include "api/endpoints/protocol_api.h"
#include "router_metrics.h"
#include "tandem/http/router.h"
#include "tandem/metrics/registry.h"
#include "workers/worker_registry.h"

namespace tandem::router {

struct RouteDeps {
  std::string served_model;
  std::int64_t created_unix_s = 0;      // reported as the model's "created"
  GenerationApi* generation = nullptr;  // /v1/completions
  ProtocolApi* protocols = nullptr;     // chat completions, responses, messages
  WorkerRegistry* registry = nullptr;
  const metrics::Registry* metrics_registry = nullptr;
  const RouterMetrics* metrics = nullptr;
  // --api-keys-file: every endpoint but /health, /ready and /v1/models (and the separate
  // operations listener's) needs a key. Null: served to anyone.
  const ApiKeyAuth* auth = nullptr;
  bool serve_metrics = true;  // false: /metrics lives on its own listener (--metrics-listen)
  // Set once the router began its drain (SIGTERM): /ready answers 503. Null: never.
  const std::atomic<bool>* draining = nullptr;
};

// The router's HTTP surface: the OpenAI and Anthropic endpoints, /v1/models, /health, /ready and
// /metrics.
absl::Status InstallRoutes(http::Router* router, const RouteDeps& deps);

// The operations listener (--metrics-listen): /metrics, /health and /ready, never authenticated,
// so scrapers and probes need no API key and the public listener need not serve them.
absl::Status InstallOperationsRoutes(http::Router* router, const RouteDeps& deps);

}  // namespace tandem::router
