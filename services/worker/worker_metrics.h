#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "kv_event_publisher.h"
#include "kv_handoff.h"
#include "tandem/engine/engine.h"
#include "tandem/kv/tiered_kv_store.h"
#include "tandem/metrics/registry.h"
#include "tandem/serving/engine_loop.h"
#include "worker_service.h"

namespace tandem::worker {

// The worker's Prometheus metrics. Values live in the components (engine loop, service, KV
// receiver); a scrape samples them, so the hot path pays nothing for metrics.
class WorkerMetrics {
 public:
  // Constant labels of tandem_worker_build_info besides role and worker.
  struct BuildLabels {
    std::string generation;    // --generation
    std::string kv_layout_id;  // what a prefill/decode pair must share (KvDiskSubdir)
    std::string backend;       // the compute backend and the kernels' ISA copy, "cpu-avx2"
  };
  static absl::StatusOr<std::unique_ptr<WorkerMetrics>> Create(const std::string& role,
                                                               const std::string& worker_id,
                                                               const BuildLabels& build);

  // Process state the components do not hold.
  struct Status {
    bool ready = false;     // what GET /ready answers
    bool draining = false;  // SIGTERM or /drain received
    int routers = 0;        // router addresses --router resolves to
    int routers_registered = 0;
  };
  // `store` and `kv_events` may be null (no lower tiers, no router).
  std::string Scrape(serving::EngineLoop& loop, const WorkerService& service,
                     const KvReceiver* receiver, const kv::TieredKvStore* store,
                     const KvEventPublisherStats* kv_events, const Status& status);
  // One completed lower-tier fetch (engine thread); counted under the slowest tier it read.
  void ObserveFetch(const engine::TierFetchReport& report);

 private:
  WorkerMetrics() = default;
  using CounterSource = metrics::CounterFromTotal;

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
  metrics::Gauge* kv_quarantined_blocks_ = nullptr;
  // Scaling and lifecycle signals (docs/deployment.md).
  metrics::Gauge* ready_ = nullptr;
  metrics::Gauge* draining_ = nullptr;
  metrics::Gauge* routers_ = nullptr;
  metrics::Gauge* routers_registered_ = nullptr;
  metrics::Gauge* rpcs_in_flight_ = nullptr;
  metrics::Gauge* kv_utilization_ = nullptr;
  metrics::Gauge* prefill_queued_tokens_ = nullptr;
  metrics::Gauge* prefill_tokens_per_second_ = nullptr;
  CounterSource prefill_tokens_;
  CounterSource prefill_busy_seconds_;
  CounterSource requests_while_draining_;
  CounterSource drain_refusals_;
  // Speed over the busy time between two scrapes; kept while idle (a capacity, not a load).
  std::int64_t speed_last_tokens_ = 0;
  double speed_last_busy_ = 0;
  CounterSource cancelled_;
  CounterSource handoffs_expired_;
  CounterSource handoffs_completed_;
  CounterSource kv_sent_bytes_;
  CounterSource engine_steps_;
  CounterSource prefill_steps_;
  CounterSource prefill_chunks_;

  // Per KV tier (label tier = device, host, disk); see docs/operations.md.
  enum TierIndex { kDevice = 0, kHost = 1, kDisk = 2, kNumTiers = 3 };
  struct TierMetrics {
    CounterSource hits;
    CounterSource misses;
    CounterSource evictions;
    CounterSource demotions;
    CounterSource expirations;
    CounterSource corruptions;
    metrics::Gauge* blocks = nullptr;
    metrics::Gauge* bytes = nullptr;
    metrics::Histogram* promotion_seconds = nullptr;
  };
  TierMetrics tiers_[kNumTiers];
  CounterSource fetch_shortfall_;
  CounterSource spill_dropped_;
  CounterSource kv_events_sent_;
  CounterSource kv_snapshots_sent_;
  CounterSource kv_events_dropped_;
  metrics::Gauge* kv_events_pending_ = nullptr;

  absl::Status AddTierMetrics(const std::vector<std::string>& labels);
  void SampleTiers(const engine::KvTierStats& engine, std::int64_t device_blocks,
                   std::int64_t device_block_bytes, const kv::TieredKvStore* store);
};

}  // namespace tandem::worker
