#include "api/http/client_channel.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "api/http/writer_slot.h"
#include "async/event.h"

namespace tandem::router {
namespace {

// A full send buffer is looked at again after this long, doubling up to the maximum: a client
// that reads slowly is polled, one that reads at all is not left waiting for long.
constexpr std::chrono::milliseconds kFirstRetry{1};
constexpr std::chrono::milliseconds kMaxRetry{20};

}  // namespace

ClientChannel::ClientChannel(std::shared_ptr<http::Responder> responder,
                             std::shared_ptr<CallCanceller> canceller, const RouterMetrics* metrics,
                             std::string endpoint, absl::Duration write_timeout,
                             async::Executor* executor)
    : responder_(std::move(responder)),
      canceller_(std::move(canceller)),
      metrics_(metrics),
      endpoint_(std::move(endpoint)),
      write_timeout_(write_timeout),
      executor_(executor) {
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

void ClientChannel::AddHeaders(std::vector<http::Header> headers) {
  for (http::Header& h : headers) extra_headers_.push_back(std::move(h));
}

void ClientChannel::Answer(http::Response response) {
  for (const http::Header& h : extra_headers_) response.headers.push_back(h);
  if (metrics_ != nullptr) metrics_->CountRequest(endpoint_, response.status);
  responder_->Respond(std::move(response));
}

bool ClientChannel::OpenStream() {
  if (slot_ != nullptr) return !open_failed_ && !gone_;
  opened_ = async::Event::Create(executor_);
  slot_ = std::make_shared<WriterSlot>(opened_);
  http::SseResponse sse;
  sse.headers = extra_headers_;
  sse.on_open = [slot = slot_, guard = std::make_shared<AbandonOnDrop>(slot_)](
                    std::shared_ptr<http::SseWriter> writer) { slot->Set(std::move(writer)); };
  if (metrics_ != nullptr) metrics_->CountRequest(endpoint_, 200);
  responder_->RespondStream(std::move(sse));
  return true;
}

void ClientChannel::Write(http::SseEvent event) {
  if (gone_ || open_failed_) return;
  pending_.push_back(std::move(event));
}

void ClientChannel::Gone(const std::string& why) {
  gone_ = true;
  pending_.clear();
  // A client that left or stopped reading: the workers must stop too.
  canceller_->Cancel(absl::CancelledError(why));
}

async::Task<bool> ClientChannel::Flush() {
  if (slot_ == nullptr) co_return pending_.empty();
  if (gone_ || open_failed_) co_return false;
  const auto give_up = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(write_timeout_);
  if (writer_ == nullptr) {
    CallCanceller::Wake on_cancel(canceller_.get(), opened_);
    async::Alarm at_timeout(opened_, give_up);
    while (!slot_->settled() && !canceller_->cancelled() &&
           std::chrono::steady_clock::now() < give_up) {
      co_await opened_->Wait();
    }
    writer_ = canceller_->cancelled() ? nullptr : slot_->writer();
    if (writer_ == nullptr) {
      open_failed_ = true;
      Gone("the client left before the stream opened");
      co_return false;
    }
    if (metrics_ != nullptr) metrics_->active_streams->Increment();
    writer_->OnCancel(CancelOnDisconnect());
  }
  std::chrono::milliseconds retry = kFirstRetry;
  while (!pending_.empty()) {
    absl::Status st = writer_->TryWrite(pending_.front());
    if (st.ok()) {
      pending_.pop_front();
      retry = kFirstRetry;
      continue;
    }
    if (st.code() != absl::StatusCode::kResourceExhausted) {
      Gone(absl::StrCat("client stream: ", st.message()));
      co_return false;
    }
    if (std::chrono::steady_clock::now() >= give_up) {
      Gone("client stream: the client did not read its stream within the write timeout");
      co_return false;
    }
    co_await async::Sleep(executor_, retry);
    retry = std::min(2 * retry, kMaxRetry);
  }
  co_return true;
}

void ClientChannel::CloseStream() {
  if (writer_ == nullptr) return;
  writer_->Close();
  writer_.reset();
  if (metrics_ != nullptr) metrics_->active_streams->Decrement();
}

}  // namespace tandem::router
