#include "client_channel.h"

#include "absl/strings/str_cat.h"
#include "writer_slot.h"

namespace tandem::router {

ClientChannel::ClientChannel(std::shared_ptr<http::Responder> responder,
                             std::shared_ptr<CallCanceller> canceller,
                             const RouterMetrics* metrics, std::string endpoint,
                             absl::Duration write_timeout)
    : responder_(std::move(responder)),
      canceller_(std::move(canceller)),
      metrics_(metrics),
      endpoint_(std::move(endpoint)),
      write_timeout_(write_timeout) {
  responder_->OnCancel(CancelOnDisconnect());
}

ClientChannel::~ClientChannel() { CloseStream(); }

std::function<void()> ClientChannel::CancelOnDisconnect() const {
  std::weak_ptr<CallCanceller> weak = canceller_;
  return [weak] {
    if (auto canceller = weak.lock()) {
      canceller->Cancel(absl::CancelledError("the client disconnected"));
    }
  };
}

void ClientChannel::Answer(http::Response response) {
  if (metrics_ != nullptr) metrics_->CountRequest(endpoint_, response.status);
  responder_->Respond(std::move(response));
}

bool ClientChannel::OpenStream() {
  if (writer_ != nullptr) return true;
  if (open_failed_) return false;
  auto slot = std::make_shared<WriterSlot>();
  http::SseResponse sse;
  sse.on_open = [slot, guard = std::make_shared<AbandonOnDrop>(slot)](
                    std::shared_ptr<http::SseWriter> writer) { slot->Set(std::move(writer)); };
  if (metrics_ != nullptr) metrics_->CountRequest(endpoint_, 200);
  responder_->RespondStream(std::move(sse));
  writer_ = slot->Wait(*canceller_, write_timeout_);
  if (writer_ == nullptr) {
    open_failed_ = true;
    canceller_->Cancel(absl::CancelledError("the client left before the stream opened"));
    return false;
  }
  if (metrics_ != nullptr) metrics_->active_streams->Increment();
  writer_->OnCancel(CancelOnDisconnect());
  return true;
}

bool ClientChannel::Write(const http::SseEvent& event) {
  if (writer_ == nullptr) return false;
  absl::Status st = writer_->Write(event, write_timeout_);
  if (st.ok()) return true;
  // A client that left or stopped reading: the workers must stop too.
  canceller_->Cancel(absl::CancelledError(absl::StrCat("client stream: ", st.message())));
  return false;
}

void ClientChannel::CloseStream() {
  if (writer_ == nullptr) return;
  writer_->Close();
  writer_.reset();
  if (metrics_ != nullptr) metrics_->active_streams->Decrement();
}

}  // namespace tandem::router
