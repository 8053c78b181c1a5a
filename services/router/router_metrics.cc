#include "router_metrics.h"

#include "absl/strings/str_cat.h"
#include "tandem/base/status_macros.h"

namespace tandem::router {
namespace {

template <typename M>
absl::StatusOr<M*> Unlabelled(absl::StatusOr<metrics::Family<M>*> family) {
  if (!family.ok()) return family.status();
  return (*family)->WithLabels({});
}

}  // namespace

absl::StatusOr<RouterMetrics> RouterMetrics::Create(metrics::Registry* r) {
  RouterMetrics m;
  TANDEM_ASSIGN_OR_RETURN(m.requests, r->AddCounter("tandem_router_requests_total",
                                                    "HTTP responses by endpoint and status.",
                                                    {"endpoint", "status"}));
  // Latencies from a millisecond (a warm tiny model) to minutes (a long prompt on a busy node).
  const std::vector<double> latency = metrics::ExponentialBuckets(0.001, 2.0, 18);
  TANDEM_ASSIGN_OR_RETURN(m.ttft_seconds,
                          Unlabelled(r->AddHistogram("tandem_router_ttft_seconds",
                                                     "Request arrival to first token sent.",
                                                     latency)));
  TANDEM_ASSIGN_OR_RETURN(
      m.inter_token_latency_seconds,
      Unlabelled(r->AddHistogram("tandem_router_inter_token_latency_seconds",
                                 "Time between consecutive tokens of one stream.", latency)));
  TANDEM_ASSIGN_OR_RETURN(m.queue_depth,
                          Unlabelled(r->AddGauge("tandem_router_queue_depth",
                                                 "Requests waiting in the admission queue.")));
  TANDEM_ASSIGN_OR_RETURN(m.active_requests,
                          Unlabelled(r->AddGauge("tandem_router_active_requests",
                                                 "Generations out on workers.")));
  TANDEM_ASSIGN_OR_RETURN(
      m.admission_limit,
      Unlabelled(r->AddGauge("tandem_router_admission_limit",
                             "Generations the router lets out on workers at once now (at most "
                             "--max-in-flight; lowered when workers refuse for capacity).")));
  TANDEM_ASSIGN_OR_RETURN(
      m.queue_predicted_wait_seconds,
      Unlabelled(r->AddGauge("tandem_router_queue_predicted_wait_seconds",
                             "Predicted queue wait of a request arriving now (0: no history).")));
  TANDEM_ASSIGN_OR_RETURN(
      m.admission_refusals,
      r->AddCounter("tandem_router_admission_refusals_total",
                    "Requests refused with 429 by the admission queue, by reason (queue_full, "
                    "queue_wait, worker_capacity).",
                    {"reason"}));
  TANDEM_ASSIGN_OR_RETURN(
      m.worker_capacity_refusals,
      Unlabelled(r->AddCounter("tandem_router_worker_capacity_refusals_total",
                               "Worker refusals for capacity before the first token; the request "
                               "went back to the head of the queue.")));
  TANDEM_ASSIGN_OR_RETURN(
      m.migrations,
      Unlabelled(r->AddCounter("tandem_router_migrations_total",
                               "Generations resumed on other workers after a worker was lost.")));
  TANDEM_ASSIGN_OR_RETURN(
      m.migrated_tokens,
      Unlabelled(r->AddCounter("tandem_router_migrated_tokens_total",
                               "Already-delivered tokens migrated generations were resumed after "
                               "(prefilled again as prompt).")));
  TANDEM_ASSIGN_OR_RETURN(
      m.migration_failures,
      Unlabelled(r->AddCounter("tandem_router_migration_failures_total",
                               "Generations that failed because workers were lost more than "
                               "--max-migrations times.")));
  TANDEM_ASSIGN_OR_RETURN(
      m.draining,
      Unlabelled(r->AddGauge("tandem_router_draining",
                             "1 from SIGTERM until exit: /ready answers 503, in-flight "
                             "generations finish (bounded by --drain-timeout-ms).")));
  TANDEM_ASSIGN_OR_RETURN(
      m.drain_refusals,
      Unlabelled(r->AddCounter("tandem_router_drain_refusals_total",
                               "Attempts a worker refused because it had begun draining before "
                               "the router heard; each was placed on another worker.")));
  TANDEM_ASSIGN_OR_RETURN(
      m.images_cache_covered,
      Unlabelled(r->AddCounter("tandem_router_images_cache_covered_total",
                               "Images not sent to an encoder: the prefill worker's prefix cache "
                               "held their KV (per the router's index).")));
  TANDEM_ASSIGN_OR_RETURN(
      m.image_rows_retries,
      Unlabelled(r->AddCounter("tandem_router_image_rows_retries_total",
                               "Attempts sent again with every image encoded because the worker "
                               "had to compute an image the router expected it to have cached.")));
  TANDEM_ASSIGN_OR_RETURN(m.active_streams,
                          Unlabelled(r->AddGauge("tandem_router_active_streams",
                                                 "Open server-sent-event responses.")));
  TANDEM_ASSIGN_OR_RETURN(m.worker_load,
                          r->AddGauge("tandem_router_worker_load",
                                      "Router in-flight plus reported running and waiting.",
                                      {"worker", "role"}));
  TANDEM_ASSIGN_OR_RETURN(m.worker_up, r->AddGauge("tandem_router_worker_up",
                                                   "1 while the worker's lease is valid.",
                                                   {"worker", "role"}));
  TANDEM_ASSIGN_OR_RETURN(
      m.worker_draining,
      r->AddGauge("tandem_router_worker_draining",
                  "1 once the worker said it is draining: it gets no new work, its requests in "
                  "flight finish.",
                  {"worker", "role"}));
  TANDEM_ASSIGN_OR_RETURN(m.kv_handoff_bytes,
                          Unlabelled(r->AddCounter("tandem_router_kv_handoff_bytes_total",
                                                   "KV bytes moved from prefill to decode.")));
  TANDEM_ASSIGN_OR_RETURN(
      m.kv_handoff_seconds,
      Unlabelled(r->AddHistogram("tandem_router_kv_handoff_seconds",
                                 "Prefill-reported KV transfer time per request.",
                                 metrics::ExponentialBuckets(0.0001, 2.0, 18))));
  TANDEM_ASSIGN_OR_RETURN(
      m.prefills_held,
      Unlabelled(r->AddGauge("tandem_router_prefills_held",
                             "Prefills waiting in the router for their prefill worker "
                             "(--prefill-hold-depth).")));
  TANDEM_ASSIGN_OR_RETURN(
      m.prefill_hold_seconds,
      Unlabelled(r->AddHistogram("tandem_router_prefill_hold_seconds",
                                 "How long held prefills waited in the router before starting.",
                                 latency)));
  TANDEM_ASSIGN_OR_RETURN(
      m.prefill_warm_ups,
      Unlabelled(r->AddCounter("tandem_router_prefill_warm_ups_total",
                               "Hot prompt prefixes sent to an idle prefill worker to compute "
                               "alone (--warm-ups).")));
  TANDEM_ASSIGN_OR_RETURN(
      m.prefill_warm_ups_failed,
      Unlabelled(r->AddCounter("tandem_router_prefill_warm_ups_failed_total",
                               "Warm-ups that ended without the worker's answer.")));
  TANDEM_ASSIGN_OR_RETURN(
      m.prefill_held_moves,
      Unlabelled(r->AddCounter("tandem_router_prefill_held_moves_total",
                               "Held prefills moved to a prefill worker that fell idle "
                               "(--held-moves).")));
  TANDEM_ASSIGN_OR_RETURN(
      m.prefill_pieces,
      Unlabelled(r->AddCounter("tandem_router_prefill_pieces_total",
                               "Leading pieces of long prompts computed as prefills of their own "
                               "before the rest (--prefill-piece-seconds).")));
  return m;
}

void RouterMetrics::RemoveWorkerSeries(const std::string& worker, const std::string& role) const {
  const std::vector<std::string> labels = {worker, role};
  for (metrics::Family<metrics::Gauge>* family : {worker_load, worker_up, worker_draining}) {
    if (family != nullptr) family->Remove(labels);
  }
}

void RouterMetrics::CountRequest(const std::string& endpoint, int status) const {
  auto counter = requests->WithLabels({endpoint, absl::StrCat(status)});
  if (counter.ok()) (*counter)->Increment();
}

}  // namespace tandem::router
