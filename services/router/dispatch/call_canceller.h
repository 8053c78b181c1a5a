#pragma once

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "async/event.h"
#include "grpcpp/client_context.h"

namespace tandem::router {

// The cancellation side of one generation: the gRPC calls it has in flight, and why it was
// cancelled (client gone, worker down, shutdown). Thread-safe; the first Cancel wins.
class CallCanceller {
 public:
  // TryCancels every attached call and every call attached later.
  void Cancel(absl::Status reason);
  bool cancelled() const;
  // OK while not cancelled.
  absl::Status reason() const;

  // Cancels `follower` with this canceller's reason whenever this one is cancelled (at once if it
  // already is), for the life of the link: one attempt of a generation follows the request (the
  // client leaving cancels the attempt), while a worker failing cancels only the attempt.
  class Follow {
   public:
    Follow(CallCanceller* leader, CallCanceller* follower);
    ~Follow();
    Follow(const Follow&) = delete;
    Follow& operator=(const Follow&) = delete;

   private:
    CallCanceller* leader_;
    CallCanceller* follower_;
  };

  // Notifies `event` on cancellation (at once if already cancelled) for the life of the scope,
  // so that a coroutine waiting on something else sees the cancellation.
  class Wake {
   public:
    Wake(CallCanceller* canceller, std::shared_ptr<async::Event> event);
    ~Wake();
    Wake(const Wake&) = delete;
    Wake& operator=(const Wake&) = delete;

   private:
    CallCanceller* canceller_;
    std::shared_ptr<async::Event> event_;
  };

  // Keeps `context` attached for the life of one call.
  class Scope {
   public:
    Scope(CallCanceller* canceller, grpc::ClientContext* context);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CallCanceller* canceller_;
    grpc::ClientContext* context_;
  };

 private:
  mutable absl::Mutex mu_;
  absl::Status reason_ ABSL_GUARDED_BY(mu_);
  std::vector<grpc::ClientContext*> calls_ ABSL_GUARDED_BY(mu_);
  std::vector<CallCanceller*> followers_ ABSL_GUARDED_BY(mu_);  // locked after this one's
  std::vector<async::Event*> wakes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::router
