#include "deferred_exchange.h"

namespace tandem::http::internal {

DeferredExchange::DeferredExchange(std::function<void(Answer)> deliver)
    : deliver_(std::move(deliver)) {}

DeferredExchange::~DeferredExchange() {
  absl::MutexLock lock(&mu_);
  if (deliver_) deliver_(Response::Text(500, "the handler dropped the response"));
}

void DeferredExchange::Deliver(Answer answer) {
  absl::MutexLock lock(&mu_);
  if (!deliver_) return;
  auto deliver = std::move(deliver_);
  deliver_ = nullptr;
  on_cancel_.clear();
  deliver(std::move(answer));
}

void DeferredExchange::OnCancel(std::function<void()> callback) {
  {
    absl::MutexLock lock(&mu_);
    if (!cancelled()) {
      if (deliver_) on_cancel_.push_back(std::move(callback));
      return;
    }
  }
  callback();
}

void DeferredExchange::Cancel() {
  std::vector<std::function<void()>> callbacks;
  {
    absl::MutexLock lock(&mu_);
    if (!deliver_ || cancelled()) return;  // answered already, or cancelled before
    deliver_ = nullptr;
    cancelled_.store(true, std::memory_order_release);
    callbacks.swap(on_cancel_);
  }
  for (auto& callback : callbacks) callback();
}

bool StartDeferred(const DeferredResponse& deferred, std::shared_ptr<Responder> responder) {
  if (!deferred.start) return false;
  try {
    deferred.start(std::move(responder));
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace tandem::http::internal
