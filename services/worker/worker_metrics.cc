#include "worker_metrics.h"

#include "tandem/config/build_info.h"

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
                                                                     const std::string& worker_id,
                                                                     const BuildLabels& build) {
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
      {&m->kv_quarantined_blocks_, "tandem_worker_kv_quarantined_blocks",
       "KV blocks of abandoned handoffs held until their sender is done or their lease ends."},
      {&m->ready_, "tandem_worker_ready",
       "1 when GET /ready answers 200: registered with the router (if any) and not draining."},
      {&m->draining_, "tandem_worker_draining",
       "1 from SIGTERM or /drain until exit: the worker takes no new work."},
      {&m->routers_, "tandem_worker_routers",
       "Router addresses --router resolves to (one per router replica)."},
      {&m->routers_registered_, "tandem_worker_routers_registered",
       "Routers this worker is registered with."},
      {&m->rpcs_in_flight_, "tandem_worker_rpcs_in_flight",
       "ReserveKv, Prefill and Generate calls not yet returned (a drain waits for 0)."},
      {&m->kv_utilization_, "tandem_worker_kv_utilization",
       "Fraction of the device KV pool neither free nor evictable (decode scaling signal)."},
      {&m->prefill_queued_tokens_, "tandem_worker_prefill_queued_tokens",
       "Prompt tokens admitted and not yet computed (prefill scaling signal)."},
      {&m->prefill_tokens_per_second_, "tandem_worker_prefill_tokens_per_second",
       "Prompt tokens computed per second of prefill step time, measured between scrapes and "
       "kept while idle."},
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
      {&m->engine_steps_, "tandem_worker_engine_steps_total", "Engine steps (one forward each)."},
      {&m->prefill_steps_, "tandem_worker_prefill_steps_total",
       "Engine steps that computed prompt tokens."},
      {&m->prefill_chunks_, "tandem_worker_prefill_chunks_total",
       "Prompt chunks computed; above prefill steps when prompts share a forward."},
      {&m->prefill_tokens_, "tandem_worker_prefill_tokens_total",
       "Prompt tokens computed by forwards (prefix-cache hits excluded)."},
      {&m->prefill_busy_seconds_, "tandem_worker_prefill_busy_seconds_total",
       "Wall time of engine steps that computed prompt tokens."},
      {&m->requests_while_draining_, "tandem_worker_requests_while_draining_total",
       "New requests accepted after the drain began (zero: they are refused and placed "
       "elsewhere)."},
      {&m->drain_refusals_, "tandem_worker_drain_refusals_total",
       "New requests refused because the drain had begun (a router that had not heard yet "
       "places them on another worker)."},
  };
  for (const CounterSpec& c : counters) {
    auto child = Child(r.AddCounter(c.name, c.help, names), labels);
    if (!child.ok()) return child.status();
    c.slot->counter = *child;
  }
  if (absl::Status st = m->AddTierMetrics(labels); !st.ok()) return st;
  // Constant 1; the labels say what runs (the Prometheus convention for build identity).
  const config::BuildInfo& b = config::GetBuildInfo();
  auto info = Child(r.AddGauge("tandem_worker_build_info",
                               "1, labelled with the build and rollout identity of this worker.",
                               {"role", "worker", "version", "commit", "generation",
                                "kv_layout_id", "backend"}),
                    {role, worker_id, b.version, b.git_commit, build.generation,
                     build.kv_layout_id, build.backend});
  if (!info.ok()) return info.status();
  (*info)->Set(1);
  return m;
}

absl::Status WorkerMetrics::AddTierMetrics(const std::vector<std::string>& labels) {
  metrics::Registry& r = registry_;
  const std::vector<std::string> names = {"role", "worker", "tier"};
  const char* tier_names[kNumTiers] = {"device", "host", "disk"};
  struct TierCounterSpec {
    CounterSource TierMetrics::*slot;
    const char* name;
    const char* help;
  };
  const TierCounterSpec counters[] = {
      {&TierMetrics::hits, "tandem_worker_kv_tier_hit_blocks_total",
       "Prompt blocks reused from this tier at admission."},
      {&TierMetrics::misses, "tandem_worker_kv_tier_miss_blocks_total",
       "Reusable prompt blocks this tier was asked for and did not hold."},
      {&TierMetrics::evictions, "tandem_worker_kv_tier_evictions_total",
       "Blocks that left this tier for lack of room (device: every reuse of a cached block)."},
      {&TierMetrics::demotions, "tandem_worker_kv_tier_demotions_total",
       "Blocks moved from this tier to the one below (device to host, host to disk)."},
      {&TierMetrics::expirations, "tandem_worker_kv_tier_expirations_total",
       "Blocks removed because their traffic class TTL passed."},
      {&TierMetrics::corruptions, "tandem_worker_kv_tier_corruptions_total",
       "Blocks whose checksum or header did not match: served as misses and deleted."},
  };
  for (const TierCounterSpec& c : counters) {
    auto family = r.AddCounter(c.name, c.help, names);
    if (!family.ok()) return family.status();
    for (int t = 0; t < kNumTiers; ++t) {
      auto child = (*family)->WithLabels({labels[0], labels[1], tier_names[t]});
      if (!child.ok()) return child.status();
      (tiers_[t].*c.slot).counter = *child;
    }
  }
  auto blocks = r.AddGauge("tandem_worker_kv_tier_blocks", "KV blocks held in this tier.", names);
  if (!blocks.ok()) return blocks.status();
  auto bytes = r.AddGauge("tandem_worker_kv_tier_bytes",
                          "Bytes of KV held in this tier (uncompressed block sizes).", names);
  if (!bytes.ok()) return bytes.status();
  auto latency = r.AddHistogram(
      "tandem_worker_kv_promotion_seconds",
      "Time from a lower-tier fetch's start until its blocks are usable in the device pool, "
      "by the slowest tier read.",
      {0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}, names);
  if (!latency.ok()) return latency.status();
  for (int t = 0; t < kNumTiers; ++t) {
    const std::vector<std::string> values = {labels[0], labels[1], tier_names[t]};
    auto b = (*blocks)->WithLabels(values);
    auto y = (*bytes)->WithLabels(values);
    auto h = (*latency)->WithLabels(values);
    if (!b.ok() || !y.ok() || !h.ok()) return absl::InternalError("tier metric labels");
    tiers_[t].blocks = *b;
    tiers_[t].bytes = *y;
    tiers_[t].promotion_seconds = *h;
  }
  const std::vector<std::string> plain = {"role", "worker"};
  struct CounterSpec {
    CounterSource* slot;
    const char* name;
    const char* help;
  };
  const CounterSpec more[] = {
      {&fetch_shortfall_, "tandem_worker_kv_fetch_shortfall_blocks_total",
       "Blocks a lower tier announced but did not deliver (gone, corrupt, or no pool room): "
       "recomputed."},
      {&spill_dropped_, "tandem_worker_kv_spill_dropped_blocks_total",
       "Evicted device blocks the host tier could not take (at its hard limit)."},
      {&kv_events_sent_, "tandem_worker_kv_events_sent_total",
       "KV block events streamed to the router."},
      {&kv_snapshots_sent_, "tandem_worker_kv_snapshots_sent_total",
       "KV snapshots streamed to the router (new stream, gap, or overflow)."},
      {&kv_events_dropped_, "tandem_worker_kv_events_dropped_total",
       "KV events dropped while the router was slow (replaced by a snapshot)."},
  };
  for (const CounterSpec& c : more) {
    auto child = Child(r.AddCounter(c.name, c.help, plain), labels);
    if (!child.ok()) return child.status();
    c.slot->counter = *child;
  }
  auto pending = Child(r.AddGauge("tandem_worker_kv_events_pending",
                                  "KV events queued for the router.", plain),
                       labels);
  if (!pending.ok()) return pending.status();
  kv_events_pending_ = *pending;
  return absl::OkStatus();
}

void WorkerMetrics::ObserveFetch(const engine::TierFetchReport& report) {
  const int tier = report.disk_blocks > 0 ? kDisk : kHost;
  tiers_[tier].promotion_seconds->Observe(report.seconds);
}

void WorkerMetrics::SampleTiers(const engine::KvTierStats& e, std::int64_t device_blocks,
                                std::int64_t device_block_bytes, const kv::TieredKvStore* store) {
  const auto d = [](std::int64_t v) { return static_cast<double>(v); };
  TierMetrics& dev = tiers_[kDevice];
  dev.hits.Sync(d(e.device_hit_blocks));
  dev.misses.Sync(d(e.host_hit_blocks + e.disk_hit_blocks + e.miss_blocks));
  dev.demotions.Sync(d(e.spilled_blocks + e.demoted_blocks));
  dev.evictions.Sync(d(e.spilled_blocks + e.spill_dropped_blocks + e.evicted_demoted_blocks));
  dev.blocks->Set(d(device_blocks));
  dev.bytes->Set(d(device_blocks * device_block_bytes));
  fetch_shortfall_.Sync(d(e.fetch_shortfall_blocks));
  spill_dropped_.Sync(d(e.spill_dropped_blocks));
  tiers_[kHost].hits.Sync(d(e.host_hit_blocks));
  tiers_[kDisk].hits.Sync(d(e.disk_hit_blocks));
  if (store == nullptr) return;
  const kv::StoreStats s = store->Stats();
  const kv::TierStats* lower[] = {&s.host, &s.disk};
  for (int t = kHost; t <= kDisk; ++t) {
    const kv::TierStats& ts = *lower[t - kHost];
    TierMetrics& m = tiers_[t];
    m.misses.Sync(static_cast<double>(ts.misses));
    m.evictions.Sync(static_cast<double>(ts.evictions));
    m.demotions.Sync(static_cast<double>(ts.demotions));
    m.expirations.Sync(static_cast<double>(ts.expirations));
    m.corruptions.Sync(static_cast<double>(ts.corruptions));
    m.blocks->Set(static_cast<double>(ts.blocks));
    m.bytes->Set(static_cast<double>(ts.bytes));
  }
}

std::string WorkerMetrics::Scrape(serving::EngineLoop& loop, const WorkerService& service,
                                  const KvReceiver* receiver, const kv::TieredKvStore* store,
                                  const KvEventPublisherStats* kv_events,
                                  const Status& status) {
  engine::KvTierStats tier_stats;
  std::int64_t device_blocks = 0;
  std::int64_t device_block_bytes = 0;
  // Between steps: the engine is single-threaded.
  loop.RunOnLoop([&](engine::Engine& e) {
        tier_stats = e.kv_tier_stats();
        device_blocks = e.block_manager().num_cached_blocks();
        device_block_bytes =
            e.block_manager().storage().block_floats() * static_cast<std::int64_t>(sizeof(float));
        return absl::OkStatus();
      })
      .IgnoreError();  // a stopping loop: the last values stay
  std::lock_guard<std::mutex> lock(mu_);
  SampleTiers(tier_stats, device_blocks, device_block_bytes, store);
  if (kv_events != nullptr) {
    const KvEventPublisherStats& p = *kv_events;
    kv_events_sent_.Sync(static_cast<double>(p.events_sent));
    kv_snapshots_sent_.Sync(static_cast<double>(p.snapshots_sent));
    kv_events_dropped_.Sync(static_cast<double>(p.events_dropped));
    kv_events_pending_->Set(static_cast<double>(p.pending_events));
  }
  const serving::LoopLoad load = loop.load();
  active_requests_->Set(load.in_flight);
  running_requests_->Set(load.running);
  waiting_requests_->Set(load.waiting);
  active_streams_->Set(service.active_streams());
  kv_free_blocks_->Set(load.free_blocks);
  kv_total_blocks_->Set(load.total_blocks);
  cancelled_.Sync(static_cast<double>(service.cancelled_total()));
  kv_sent_bytes_.Sync(static_cast<double>(service.kv_sent_bytes_total()));
  engine_steps_.Sync(static_cast<double>(load.steps));
  prefill_steps_.Sync(static_cast<double>(load.prefill_steps));
  prefill_chunks_.Sync(static_cast<double>(load.prefill_chunks));
  prefill_tokens_.Sync(static_cast<double>(load.prefill_tokens));
  prefill_busy_seconds_.Sync(load.prefill_busy_seconds);
  prefill_queued_tokens_->Set(static_cast<double>(load.queued_prefill_tokens));
  if (load.prefill_busy_seconds > speed_last_busy_) {
    prefill_tokens_per_second_->Set(
        static_cast<double>(load.prefill_tokens - speed_last_tokens_) /
        (load.prefill_busy_seconds - speed_last_busy_));
    speed_last_busy_ = load.prefill_busy_seconds;
    speed_last_tokens_ = load.prefill_tokens;
  }
  kv_utilization_->Set(load.total_blocks > 0 ? 1.0 - static_cast<double>(load.free_blocks) /
                                                         load.total_blocks
                                             : 0.0);
  ready_->Set(status.ready ? 1 : 0);
  draining_->Set(status.draining ? 1 : 0);
  routers_->Set(status.routers);
  routers_registered_->Set(status.routers_registered);
  rpcs_in_flight_->Set(service.rpcs_in_flight());
  requests_while_draining_.Sync(static_cast<double>(service.requests_while_draining_total()));
  drain_refusals_.Sync(static_cast<double>(service.drain_refusals_total()));
  if (receiver != nullptr) {
    const KvReceiverStats s = receiver->stats();
    kv_reserved_blocks_->Set(s.reserved_blocks);
    kv_active_handoffs_->Set(s.active_handoffs);
    kv_quarantined_blocks_->Set(s.quarantined_blocks);
    handoffs_expired_.Sync(static_cast<double>(s.expired_total));
    handoffs_completed_.Sync(static_cast<double>(s.completed_total));
  }
  return registry_.RenderText();
}

}  // namespace tandem::worker
