#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "grpcpp/alarm.h"
#include "grpcpp/support/server_callback.h"
#include "tandem/serving/engine_loop.h"
#include "tandem/v1/worker.grpc.pb.h"

namespace tandem::worker {

class GenerateStream;

// Starts the writes of streams that have new updates, on one thread of its own. The engine thread
// only queues an update and, when the stream has no write in flight, posts the stream here once:
// one wake-up per engine step for all the streams it advanced, and the serialisation and socket
// work run beside the next step instead of inside it.
class StreamOutbox {
 public:
  StreamOutbox();
  ~StreamOutbox();
  StreamOutbox(const StreamOutbox&) = delete;
  StreamOutbox& operator=(const StreamOutbox&) = delete;

  void Post(std::shared_ptr<GenerateStream> stream);

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<GenerateStream>> ready_;
  bool stopping_ = false;
  std::thread thread_;
};

// One Generate call on gRPC's callback API: no thread per stream. Updates from the engine are
// coalesced into one message per write (whatever piled up while the previous write was in flight,
// so a slow client costs its own stream memory, never the engine's time). The client going away,
// or the request's deadline, cancels the request in the engine; the call ends when the engine has
// let go of it (its final update), so a drain that counts calls also covers their engine work.
class GenerateStream final : public grpc::ServerWriteReactor<v1::GenerateResponse>,
                             public std::enable_shared_from_this<GenerateStream> {
 public:
  struct Counters {
    std::atomic<int>* rpcs_in_flight = nullptr;  // decremented when gRPC is done with the call
    std::atomic<int>* active_streams = nullptr;
    std::atomic<std::int64_t>* cancelled_total = nullptr;
  };
  struct Options {
    std::string request_id;
    // Zero: none. Checked by an alarm, not by polling.
    std::int64_t deadline_unix_ms = 0;
    // A handed-off request's first token was counted by prefill, not by this engine.
    int first_token_credit = 0;
    // The call's context, for the trailer that asks for image rows (rpc::kImageRowsNeededTrailer).
    grpc::CallbackServerContext* context = nullptr;
  };

  // The stream owns itself until gRPC calls OnDone; the engine's sink keeps it alive after that
  // only as long as the engine holds the request.
  static std::shared_ptr<GenerateStream> Create(serving::EngineLoop* loop, StreamOutbox* outbox,
                                                Options options, Counters counters);

  // The engine-side sink: queues an update; safe from any thread, at any time.
  serving::UpdateSink Sink();
  // After the request was submitted (or refused: then the call ends with that status at once).
  void Start(const grpc::Status& submitted);

  // Writes what is pending, or ends the call; called by the outbox and after each write.
  void Pump();

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  GenerateStream(serving::EngineLoop* loop, StreamOutbox* outbox, Options options,
                 Counters counters);
  void Push(const serving::RequestUpdate& update);
  // Cancels the request in the engine; the call ends with `why` once the engine let go.
  void Abort(grpc::Status why);

  serving::EngineLoop* const loop_;
  StreamOutbox* const outbox_;
  const Options options_;
  const Counters counters_;
  std::shared_ptr<GenerateStream> self_;  // reset in OnDone
  grpc::Alarm deadline_alarm_;
  bool streaming_ = false;  // submitted: counted in active_streams until OnDone

  std::mutex mu_;
  std::deque<serving::RequestUpdate> pending_;
  // Held by whoever may start the next write or the Finish: the outbox, a write in flight, or the
  // Finish itself (never released). Only its holder touches out_.
  bool turn_ = false;
  bool finishing_ = false;
  bool aborted_ = false;
  bool sent_tokens_ = false;
  grpc::Status abort_status_;
  v1::GenerateResponse out_;
};

}  // namespace tandem::worker
