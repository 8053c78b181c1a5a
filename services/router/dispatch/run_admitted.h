#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "admission/admission.h"
#include "dispatch/call_canceller.h"
#include "dispatch/dispatcher.h"
#include "router_metrics.h"
#include "workers/worker_selector.h"

namespace tandem::router {

// What every generation endpoint shares to run an admitted request on workers.
struct RunDeps {
  WorkerSelector* selector = nullptr;
  Dispatcher* dispatcher = nullptr;
  const RouterMetrics* metrics = nullptr;  // optional
  std::string model;                       // served model name, for worker selection
  int max_migrations = 3;                  // resumptions on other workers after a worker is lost
  async::Executor* executor = nullptr;     // where the generation's coroutines resume
};

// Waits for the request's turn in the admission queue, picks its workers then (not at arrival,
// so that the choice sees the load of the moment), and runs it. A worker that refuses for
// capacity before anything was delivered sends the request back to the head of the queue and it
// runs again when a place frees; nothing reaches the client until a worker has accepted it. A
// worker lost mid-generation (it died, its lease ran out, it dropped the request while shutting
// down) is survived: the generation resumes on other workers from the tokens the client already
// has (prompt + those tokens prefilled again, sampling continued from their count), so the client
// sees one uninterrupted stream; after max_migrations it fails with UNAVAILABLE. The plan's
// leases end as soon as the workers are done, so their load drops before the response is
// written.
// The arguments must outlive the returned task.
async::Task<absl::StatusOr<GenerationOutcome>> RunAdmitted(const RunDeps& deps,
                                                           AdmissionTicket* ticket,
                                                           const GenerationRequest& request,
                                                           CallCanceller* canceller,
                                                           TokenSink* sink);

}  // namespace tandem::router
