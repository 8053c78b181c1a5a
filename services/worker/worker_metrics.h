#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "kv_handoff.h"
#include "tandem/metrics/registry.h"
#include "tandem/serving/engine_loop.h"
#include "worker_service.h"

namespace tandem::worker {

// The worker's Prometheus metrics. Values live in the components (engine loop, service, KV
// receiver); a scrape samples them, so the hot path pays nothing for metrics.
class WorkerMetrics {
 public:
  static absl::StatusOr<std::unique_ptr<WorkerMetrics>> Create(const std::string& role,
                                                               const std::string& worker_id);

  std::string Scrape(const serving::EngineLoop& loop, const WorkerService& service,
                     const KvReceiver* receiver);

 private:
  WorkerMetrics() = default;
  // Counters are monotonic in the components too; a scrape adds what accrued since the last one.
  struct CounterSource {
    metrics::Counter* counter = nullptr;
    double last = 0;
    void Sync(double now) {
      if (now > last) counter->Increment(now - last);
      last = now;
    }
  };

  std::mutex mu_;
  metrics::Registry registry_;
  metrics::Gauge* active_requests_ = nullptr;
  metrics::Gauge* running_requests_ = nullptr;
  metrics::Gauge* waiting_requests_ = nullptr;
  metrics::Gauge* active_streams_ = nullptr;
  metrics::Gauge* kv_free_blocks_ = nullptr;
  metrics::Gauge* kv_total_blocks_ = nullptr;
  metrics::Gauge* kv_reserved_blocks_ = nullptr;
  metrics::Gauge* kv_active_handoffs_ = nullptr;
  CounterSource cancelled_;
  CounterSource handoffs_expired_;
  CounterSource handoffs_completed_;
  CounterSource kv_sent_bytes_;
};

}  // namespace tandem::worker
