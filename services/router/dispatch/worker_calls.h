#pragma once

#include <memory>
#include <utility>

#include "async/event.h"
#include "async/task.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "tandem/v1/worker.grpc.pb.h"

namespace tandem::router {

// Awaits one unary call made through the stub's callback API: `start` issues it with the
// completion callback it is given. Whatever the call uses (context, request, response) must live
// in the awaiting coroutine's frame, which the call cannot outlive: the task completes only after
// gRPC's callback ran.
template <typename Start>
async::Task<grpc::Status> CallUnary(async::Executor* executor, Start start) {
  std::shared_ptr<async::Event> done = async::Event::Create(executor);
  grpc::Status status;
  start([done, &status](grpc::Status result) {
    status = std::move(result);
    done->Notify();
  });
  co_await done->Wait();
  co_return status;
}

// A worker's Generate stream read through the callback API: one message at a time, each read
// started only once the previous message was handled (gRPC flow control then holds the worker
// back for a slow client). The owner must read until Next() gives null, then await Finished()
// before destroying it.
class GenerateStream final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  explicit GenerateStream(async::Executor* executor)
      : read_(async::Event::Create(executor)), done_(async::Event::Create(executor)) {}

  void Start(v1::Worker::Stub& stub, grpc::ClientContext* context,
             const v1::GenerateRequest* request) {
    stub.async()->Generate(context, request, this);
    // Reads are started from the coroutine, outside gRPC's reactions: without a hold, gRPC could
    // finish the call (OnDone) between two reads, and the next read would never complete.
    AddHold();
    StartRead(&message_);
    StartCall();
  }
  // The next message, or null once the stream has ended.
  async::Task<const v1::GenerateResponse*> Next() {
    if (started_next_) StartRead(&message_);
    started_next_ = true;
    co_await read_->Wait();
    if (read_ok_) co_return &message_;
    RemoveHold();  // no more reads: gRPC may finish the call
    co_return nullptr;
  }
  // The call's status, once gRPC is done with it.
  async::Task<grpc::Status> Finished() {
    co_await done_->Wait();
    co_return status_;
  }

  void OnReadDone(bool ok) override {
    read_ok_ = ok;
    std::shared_ptr<async::Event> read = read_;
    read->Notify();
  }
  void OnDone(const grpc::Status& status) override {
    status_ = status;
    // The owner may destroy this object as soon as it is notified: touch nothing after.
    std::shared_ptr<async::Event> done = done_;
    done->Notify();
  }

 private:
  std::shared_ptr<async::Event> read_;
  std::shared_ptr<async::Event> done_;
  v1::GenerateResponse message_;
  bool read_ok_ = false;
  bool started_next_ = false;
  grpc::Status status_;
};

}  // namespace tandem::router
