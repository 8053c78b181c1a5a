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
  metrics::Gauge* queue_depth = nullptr;      // waiting in the admission queue
  metrics::Gauge* active_requests = nullptr;  // generations out on workers (stream or not)
  metrics::Gauge* admission_limit = nullptr;  // effective in-flight limit (adapts to refusals)
  metrics::Gauge* queue_predicted_wait_seconds = nullptr;  // for a request arriving now
  metrics::Family<metrics::Counter>* admission_refusals = nullptr;  // {reason}
  metrics::Counter* worker_capacity_refusals = nullptr;  // retried, not answered
  metrics::Counter* migrations = nullptr;          // generations resumed on other workers
  metrics::Counter* migrated_tokens = nullptr;     // tokens they resumed after
  metrics::Counter* migration_failures = nullptr;  // lost past --max-migrations
  metrics::Counter* drain_refusals = nullptr;      // placed again: the worker had begun draining
  // Images not sent to an encoder because the chosen worker's prefix cache covers them, and
  // attempts sent again with every image encoded because a worker's cache did not.
  metrics::Counter* images_cache_covered = nullptr;
  metrics::Counter* image_rows_retries = nullptr;
  metrics::Gauge* active_streams = nullptr;   // open SSE responses
  metrics::Gauge* draining = nullptr;         // 1 from SIGTERM until exit
  metrics::Family<metrics::Gauge>* worker_load = nullptr;  // {worker, role}
  metrics::Family<metrics::Gauge>* worker_up = nullptr;    // {worker, role}
  metrics::Family<metrics::Gauge>* worker_draining = nullptr;  // {worker, role}
  // Deletes every per-worker series ({worker, role} families above) of this worker id and role:
  // the registry calls it once it forgets a registration (deregistered, or down too long), after
  // dropping its cached child pointers.
  void RemoveWorkerSeries(const std::string& worker, const std::string& role) const;
  metrics::Counter* kv_handoff_bytes = nullptr;
  metrics::Histogram* kv_handoff_seconds = nullptr;
  metrics::Gauge* prefills_held = nullptr;             // in the tandem policy's hold queue
  metrics::Histogram* prefill_hold_seconds = nullptr;  // routed to released, held ones only
  metrics::Counter* prefill_warm_ups = nullptr;        // hot prefixes sent to idle workers
  metrics::Counter* prefill_warm_ups_failed = nullptr;
  metrics::Counter* prefill_held_moves = nullptr;  // held prefills taken over by idle workers
  metrics::Counter* prefill_pieces = nullptr;      // leading pieces of long prompts sent alone
};

}  // namespace tandem::router
