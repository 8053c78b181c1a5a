#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "embedding_cache.h"
#include "encoder_service.h"
#include "tandem/metrics/registry.h"

namespace tandem::encoder {

// The encoder's Prometheus metrics. State lives in the cache and the service; a scrape samples
// it (counters advance by what accrued since the last scrape), so encoding pays nothing.
class EncoderMetrics {
 public:
  static absl::StatusOr<std::unique_ptr<EncoderMetrics>> Create(const std::string& encoder_id);

  // Observed by the service around every tower run.
  metrics::Histogram* encode_seconds() const { return encode_seconds_; }
  std::string Scrape(const EmbeddingCache& cache, const EncoderService& service, bool ready,
                     bool draining);

 private:
  EncoderMetrics() = default;
  using CounterSource = metrics::CounterFromTotal;

  absl::Mutex mu_;
  metrics::Registry registry_;
  metrics::Histogram* encode_seconds_ = nullptr;
  CounterSource images_, hits_, misses_, tower_runs_, joined_, evictions_, leases_expired_,
      refused_invalid_, refused_busy_, refused_full_, fetches_, fetched_bytes_;
  metrics::Gauge* bytes_held_ = nullptr;
  metrics::Gauge* entries_ = nullptr;
  metrics::Gauge* pinned_ = nullptr;
  metrics::Gauge* leases_ = nullptr;
  metrics::Gauge* encoding_ = nullptr;
  metrics::Gauge* waiting_ = nullptr;
  metrics::Gauge* ready_ = nullptr;
  metrics::Gauge* draining_ = nullptr;
};

}  // namespace tandem::encoder
