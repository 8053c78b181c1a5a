#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "tandem/metrics/registry.h"

namespace tandem::router {

// Every metric the router exports, registered once in a registry the app owns.
struct RouterMetrics {
  static absl::StatusOr<RouterMetrics> Create(metrics::Registry* registry);

  // One response: `endpoint` is the route ("/v1/completions"), `status` the HTTP status.
  void CountRequest(const std::string& endpoint, int status) const;

  metrics::Family<metrics::Counter>* requests = nullptr;  // {endpoint, status}
  metrics::Histogram* ttft_seconds = nullptr;
  metrics::Histogram* inter_token_latency_seconds = nullptr;
  metrics::Gauge* queue_depth = nullptr;      // admitted, no worker call started yet
  metrics::Gauge* active_requests = nullptr;  // admitted generations (stream or not)
  metrics::Gauge* active_streams = nullptr;   // open SSE responses
  metrics::Family<metrics::Gauge>* worker_load = nullptr;  // {worker, role}
  metrics::Family<metrics::Gauge>* worker_up = nullptr;    // {worker, role}
  metrics::Counter* kv_handoff_bytes = nullptr;
  metrics::Histogram* kv_handoff_seconds = nullptr;
  metrics::Gauge* prefills_held = nullptr;             // in the tandem policy's hold queue
  metrics::Histogram* prefill_hold_seconds = nullptr;  // routed to released, held ones only
};

}  // namespace tandem::router
