#include "encoder_metrics.h"

#include "absl/strings/str_cat.h"

namespace tandem::encoder {

absl::StatusOr<std::unique_ptr<EncoderMetrics>> EncoderMetrics::Create(
    const std::string& encoder_id) {
  std::unique_ptr<EncoderMetrics> m(new EncoderMetrics());
  metrics::Registry& r = m->registry_;
  auto counter = [&](CounterSource* src, const char* name, const char* help) -> absl::Status {
    auto family = r.AddCounter(name, help);
    if (!family.ok()) return family.status();
    auto child = (*family)->WithLabels({});
    if (!child.ok()) return child.status();
    src->counter = *child;
    return absl::OkStatus();
  };
  auto gauge = [&](metrics::Gauge** out, const char* name, const char* help) -> absl::Status {
    auto family = r.AddGauge(name, help);
    if (!family.ok()) return family.status();
    auto child = (*family)->WithLabels({});
    if (!child.ok()) return child.status();
    *out = *child;
    return absl::OkStatus();
  };
  auto info = r.AddGauge("tandem_encoder_info", "Constant 1, labelled with the encoder id",
                         {"encoder"});
  if (!info.ok()) return info.status();
  if (auto child = (*info)->WithLabels({encoder_id}); child.ok()) (*child)->Set(1);
  for (absl::Status st : {
           counter(&m->images_, "tandem_encoder_images_total", "Images answered with rows"),
           counter(&m->hits_, "tandem_encoder_cache_hits_total",
                   "Images answered from the cache (no tower run)"),
           counter(&m->misses_, "tandem_encoder_cache_misses_total", "Images not in the cache"),
           counter(&m->tower_runs_, "tandem_encoder_tower_runs_total",
                   "Vision tower runs (failed ones included)"),
           counter(&m->joined_, "tandem_encoder_joined_total",
                   "Images that waited for an identical one already encoding"),
           counter(&m->evictions_, "tandem_encoder_cache_evictions_total",
                   "Cached rows evicted to stay within --cache-mb"),
           counter(&m->leases_expired_, "tandem_encoder_leases_expired_total",
                   "Leases that ran out before their prefill released them"),
           counter(&m->refused_invalid_, "tandem_encoder_refused_invalid_total",
                   "Malformed calls refused before the tower"),
           counter(&m->refused_busy_, "tandem_encoder_refused_busy_total",
                   "Images refused because too many waited for the tower"),
           counter(&m->refused_full_, "tandem_encoder_refused_full_total",
                   "Images refused because pinned rows filled the cache"),
           counter(&m->fetches_, "tandem_encoder_fetches_total", "Row fetches served"),
           counter(&m->fetched_bytes_, "tandem_encoder_fetched_bytes_total",
                   "Bytes of rows sent to prefill workers"),
           gauge(&m->bytes_held_, "tandem_encoder_cache_bytes", "Bytes of rows held"),
           gauge(&m->entries_, "tandem_encoder_cache_entries", "Images whose rows are held"),
           gauge(&m->pinned_, "tandem_encoder_cache_pinned_entries",
                 "Images pinned by at least one lease"),
           gauge(&m->leases_, "tandem_encoder_leases", "Live leases"),
           gauge(&m->encoding_, "tandem_encoder_encoding", "Tower runs in progress"),
           gauge(&m->waiting_, "tandem_encoder_waiting", "Images waiting for the tower"),
           gauge(&m->ready_, "tandem_encoder_ready", "1 when /ready answers 200"),
           gauge(&m->draining_, "tandem_encoder_draining", "1 once a drain began"),
       }) {
    if (!st.ok()) return st;
  }
  auto hist = r.AddHistogram("tandem_encoder_encode_seconds",
                             "Preprocessing + vision tower time per image",
                             {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10});
  if (!hist.ok()) return hist.status();
  auto h = (*hist)->WithLabels({});
  if (!h.ok()) return h.status();
  m->encode_seconds_ = *h;
  return m;
}

std::string EncoderMetrics::Scrape(const EmbeddingCache& cache, const EncoderService& service,
                                   bool ready, bool draining) {
  absl::MutexLock lock(&mu_);
  const EmbeddingCacheStats c = cache.stats();
  const EncoderServiceStats s = service.stats();
  images_.Sync(s.images);
  hits_.Sync(c.hits);
  misses_.Sync(c.misses);
  tower_runs_.Sync(c.computes);
  joined_.Sync(c.joined);
  evictions_.Sync(c.evictions);
  leases_expired_.Sync(c.leases_expired);
  refused_invalid_.Sync(s.refused_invalid);
  refused_busy_.Sync(s.refused_busy);
  refused_full_.Sync(c.refused_full);
  fetches_.Sync(s.fetches);
  fetched_bytes_.Sync(s.fetched_bytes);
  bytes_held_->Set(c.bytes_held);
  entries_->Set(c.entries);
  pinned_->Set(c.pinned_entries);
  leases_->Set(c.leases);
  encoding_->Set(s.encoding);
  waiting_->Set(s.waiting);
  ready_->Set(ready ? 1 : 0);
  draining_->Set(draining ? 1 : 0);
  return registry_.RenderText();
}

}  // namespace tandem::encoder
