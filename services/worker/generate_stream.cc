#include "generate_stream.h"

#include <utility>

#include "tandem/rpc/conversions.h"

namespace tandem::worker {

StreamOutbox::StreamOutbox() : thread_([this] { Run(); }) {}

StreamOutbox::~StreamOutbox() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void StreamOutbox::Post(std::shared_ptr<GenerateStream> stream) {
  bool was_empty;
  {
    std::lock_guard<std::mutex> lock(mu_);
    was_empty = ready_.empty();
    ready_.push_back(std::move(stream));
  }
  if (was_empty) cv_.notify_one();
}

void StreamOutbox::Run() {
  std::vector<std::shared_ptr<GenerateStream>> batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !ready_.empty(); });
      // What was posted before the stop still gets its write: those streams end cleanly.
      if (ready_.empty()) return;
      batch.swap(ready_);
    }
    for (const std::shared_ptr<GenerateStream>& stream : batch) stream->Pump();
    batch.clear();
  }
}

std::shared_ptr<GenerateStream> GenerateStream::Create(serving::EngineLoop* loop,
                                                       StreamOutbox* outbox, Options options,
                                                       Counters counters) {
  std::shared_ptr<GenerateStream> stream(
      new GenerateStream(loop, outbox, std::move(options), counters));
  stream->self_ = stream;
  return stream;
}

GenerateStream::GenerateStream(serving::EngineLoop* loop, StreamOutbox* outbox, Options options,
                               Counters counters)
    : loop_(loop), outbox_(outbox), options_(std::move(options)), counters_(counters) {
  counters_.rpcs_in_flight->fetch_add(1);
}

serving::UpdateSink GenerateStream::Sink() {
  return [stream = shared_from_this()](const serving::RequestUpdate& u) { stream->Push(u); };
}

void GenerateStream::Start(const grpc::Status& submitted) {
  if (!submitted.ok()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      finishing_ = true;
      turn_ = true;
    }
    Finish(submitted);
    return;
  }
  streaming_ = true;
  counters_.active_streams->fetch_add(1);
  if (options_.deadline_unix_ms > 0) {
    const auto deadline = std::chrono::system_clock::time_point(
        std::chrono::milliseconds(options_.deadline_unix_ms));
    deadline_alarm_.Set(deadline, [weak = weak_from_this()](bool fired) {
      if (!fired) return;  // cancelled: the call ended first
      if (std::shared_ptr<GenerateStream> stream = weak.lock()) {
        stream->Abort(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "request deadline passed"));
      }
    });
  }
}

void GenerateStream::Push(const serving::RequestUpdate& update) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finishing_) return;
    pending_.push_back(update);
    if (turn_) return;  // the holder writes it after its current write
    turn_ = true;
  }
  outbox_->Post(shared_from_this());
}

void GenerateStream::Pump() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (pending_.empty()) {
      turn_ = false;
      return;
    }
    std::deque<serving::RequestUpdate> batch;
    batch.swap(pending_);
    out_.Clear();
    bool finished = false;
    bool rows_missing = false;  // the request ended for want of image rows (out_.error() says so)
    for (const serving::RequestUpdate& u : batch) {
      if (!sent_tokens_ && !u.new_tokens.empty()) {
        out_.mutable_usage()->set_cached_prompt_tokens(u.cached_tokens);
        sent_tokens_ = true;
      }
      for (std::int32_t t : u.new_tokens) out_.add_token_ids(t);
      if (!u.finished) continue;
      finished = true;
      out_.set_finish_reason(rpc::ToProto(u.finish_reason));
      if (!u.error.empty()) out_.set_error(u.error);
      rows_missing = rows_missing || u.image_rows_missing;
      out_.mutable_usage()->set_prompt_tokens(u.prompt_tokens);
      out_.mutable_usage()->set_completion_tokens(u.completion_tokens +
                                                  options_.first_token_credit);
      out_.mutable_usage()->set_cached_prompt_tokens(u.cached_tokens);
    }
    if (aborted_) {
      // Nothing more goes to a client that left or ran out of time; the call ends once the
      // engine has let go of the request.
      if (!finished) continue;
      finishing_ = true;
      const grpc::Status why = abort_status_;
      lock.unlock();
      Finish(why);
      return;
    }
    if (finished && rows_missing) {
      // Not an error of the request: the router sends it again (after the tokens it already
      // has) with every image's rows. Tokens of this last batch are dropped; the retry makes them.
      finishing_ = true;
      lock.unlock();
      if (options_.context != nullptr) {
        options_.context->AddTrailingMetadata(rpc::kImageRowsNeededTrailer, "1");
      }
      Finish(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, out_.error()));
      return;
    }
    if (finished) {
      finishing_ = true;
      lock.unlock();
      StartWriteAndFinish(&out_, grpc::WriteOptions(), grpc::Status::OK);
      return;
    }
    lock.unlock();
    StartWrite(&out_);
    return;
  }
}

void GenerateStream::Abort(grpc::Status why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finishing_ || aborted_) return;
    aborted_ = true;
    abort_status_ = std::move(why);
  }
  counters_.cancelled_total->fetch_add(1);
  loop_->Cancel(options_.request_id);
}

void GenerateStream::OnWriteDone(bool ok) {
  // The client is gone: stop the work, then wait for the engine to let go of the request.
  if (!ok) Abort(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
  Pump();
}

void GenerateStream::OnCancel() {
  Abort(grpc::Status(grpc::StatusCode::CANCELLED, "client cancelled"));
}

void GenerateStream::OnDone() {
  deadline_alarm_.Cancel();
  std::shared_ptr<GenerateStream> last = std::move(self_);
  if (streaming_) counters_.active_streams->fetch_sub(1);
  counters_.rpcs_in_flight->fetch_sub(1);
  // `last` may be the final reference: nothing touches members after this point.
}

}  // namespace tandem::worker
