#pragma once

#include <atomic>
#include <functional>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "tandem/http/router.h"

namespace tandem::http::internal {

// The Responder handed to a deferred handler. `deliver` passes the answer to the connection (it
// must not block); Cancel() is the connection telling the handler nobody is waiting anymore.
class DeferredExchange final : public Responder {
 public:
  using Answer = std::variant<Response, SseResponse>;
  explicit DeferredExchange(std::function<void(Answer)> deliver);
  // A handler that let go without answering must not leave the client hanging.
  ~DeferredExchange() override;

  void Respond(Response response) override { Deliver(std::move(response)); }
  void RespondStream(SseResponse stream) override { Deliver(std::move(stream)); }
  bool cancelled() const override { return cancelled_.load(std::memory_order_acquire); }
  void OnCancel(std::function<void()> callback) override;

  // I/O side: fails the exchange (client gone, shutdown) and runs the callbacks. Idempotent.
  void Cancel();

 private:
  void Deliver(Answer answer);

  std::atomic<bool> cancelled_{false};
  absl::Mutex mu_;
  std::function<void(Answer)> deliver_ ABSL_GUARDED_BY(mu_);  // null once answered or cancelled
  std::vector<std::function<void()>> on_cancel_ ABSL_GUARDED_BY(mu_);
};

// Calls the handler's start; false when it is missing or throws.
bool StartDeferred(const DeferredResponse& deferred, std::shared_ptr<Responder> responder);

}  // namespace tandem::http::internal
