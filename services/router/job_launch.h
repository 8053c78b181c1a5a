#pragma once

#include <memory>

#include "admission.h"
#include "tandem/http/router.h"
#include "task_runner.h"

namespace tandem::router {

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
