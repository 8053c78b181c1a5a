#include "worker_metrics.h"

namespace tandem::worker {
namespace {

template <typename M>
absl::StatusOr<M*> Child(absl::StatusOr<metrics::Family<M>*> family,
                         const std::vector<std::string>& labels) {
  if (!family.ok()) return family.status();
  return (*family)->WithLabels(labels);
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerMetrics>> WorkerMetrics::Create(const std::string& role,
                                                                     const std::string& worker_id) {
  std::unique_ptr<WorkerMetrics> m(new WorkerMetrics());
  const std::vector<std::string> names = {"role", "worker"};
  const std::vector<std::string> labels = {role, worker_id};
  metrics::Registry& r = m->registry_;
  struct GaugeSpec {
    metrics::Gauge** slot;
    const char* name;
    const char* help;
  };
  const GaugeSpec gauges[] = {
      {&m->active_requests_, "tandem_worker_active_requests",
       "Requests admitted to the engine and not finished."},
      {&m->running_requests_, "tandem_worker_running_requests", "Requests in the running batch."},
      {&m->waiting_requests_, "tandem_worker_waiting_requests", "Requests waiting for admission."},
      {&m->active_streams_, "tandem_worker_active_streams", "Open Generate streams."},
      {&m->kv_free_blocks_, "tandem_worker_kv_free_blocks", "KV blocks free or evictable."},
      {&m->kv_total_blocks_, "tandem_worker_kv_total_blocks", "KV blocks in the pool."},
      {&m->kv_reserved_blocks_, "tandem_worker_kv_reserved_blocks",
       "KV blocks reserved for handoffs that have not been committed."},
      {&m->kv_active_handoffs_, "tandem_worker_kv_active_handoffs",
       "KV handoffs reserved and not yet committed, abandoned or expired."},
  };
  for (const GaugeSpec& g : gauges) {
    auto child = Child(r.AddGauge(g.name, g.help, names), labels);
    if (!child.ok()) return child.status();
    *g.slot = *child;
  }
  struct CounterSpec {
    CounterSource* slot;
    const char* name;
    const char* help;
  };
  const CounterSpec counters[] = {
      {&m->cancelled_, "tandem_worker_requests_cancelled_total",
       "Requests stopped because the client went away, cancelled or timed out."},
      {&m->handoffs_expired_, "tandem_worker_kv_handoffs_expired_total",
       "KV reservations reclaimed because their lease ran out."},
      {&m->handoffs_completed_, "tandem_worker_kv_handoffs_completed_total",
       "KV handoffs whose blocks arrived and entered decoding."},
      {&m->kv_sent_bytes_, "tandem_worker_kv_sent_bytes_total",
       "KV bytes written to decode workers."},
  };
  for (const CounterSpec& c : counters) {
    auto child = Child(r.AddCounter(c.name, c.help, names), labels);
    if (!child.ok()) return child.status();
    c.slot->counter = *child;
  }
  return m;
}

std::string WorkerMetrics::Scrape(const serving::EngineLoop& loop, const WorkerService& service,
                                  const KvReceiver* receiver) {
  std::lock_guard<std::mutex> lock(mu_);
  const serving::LoopLoad load = loop.load();
  active_requests_->Set(load.in_flight);
  running_requests_->Set(load.running);
  waiting_requests_->Set(load.waiting);
  active_streams_->Set(service.active_streams());
  kv_free_blocks_->Set(load.free_blocks);
  kv_total_blocks_->Set(load.total_blocks);
  cancelled_.Sync(static_cast<double>(service.cancelled_total()));
  kv_sent_bytes_.Sync(static_cast<double>(service.kv_sent_bytes_total()));
  if (receiver != nullptr) {
    const KvReceiverStats s = receiver->stats();
    kv_reserved_blocks_->Set(s.reserved_blocks);
    kv_active_handoffs_->Set(s.active_handoffs);
    handoffs_expired_.Sync(static_cast<double>(s.expired_total));
    handoffs_completed_.Sync(static_cast<double>(s.completed_total));
  }
  return registry_.RenderText();
}

}  // namespace tandem::worker
