#pragma once

#include <memory>

#include "admission.h"
#include "dispatcher.h"
#include "tandem/http/router.h"
#include "task_runner.h"
#include "worker_selector.h"

namespace tandem::router {

// Runs an admitted generation on its workers. The plan is released as soon as the workers are
// done, so their load drops before the response is written.
inline absl::StatusOr<GenerationOutcome> RunAdmitted(Dispatcher* dispatcher, AdmissionTicket* ticket,
                                                     const GenerationRequest& request,
                                                     WorkerPlan& plan, CallCanceller* canceller,
                                                     TokenSink* sink) {
  ticket->Started();
  absl::StatusOr<GenerationOutcome> outcome = dispatcher->Run(request, plan, canceller, sink);
  plan = WorkerPlan{};
  return outcome;
}

// The deferred HTTP answer of a job (GenerationJob, ProtocolJob): a generation blocks on gRPC for
// its whole length, so a runner thread waits for it, not an I/O thread.
template <typename Job>
http::HandlerResult LaunchJob(TaskRunner* runner, std::shared_ptr<Job> job, bool stream) {
  return http::DeferredResponse{[runner, job, stream](std::shared_ptr<http::Responder> r) {
    runner->Spawn([job, stream, r = std::move(r)]() mutable {
      if (stream) {
        job->RunStreaming(std::move(r));
      } else {
        job->RunToCompletion(std::move(r));
      }
    });
  }};
}

}  // namespace tandem::router
