#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "tandem/engine/engine.h"

namespace tandem::serving {

// What a request's sink hears after each engine step that touched it.
struct RequestUpdate {
  std::vector<std::int32_t> new_tokens;
  bool finished = false;
  engine::FinishReason finish_reason = engine::FinishReason::kNone;
  std::string error;
  bool image_rows_missing = false;  // see engine::StepOutput
  int prompt_tokens = 0;
  int cached_tokens = 0;
  int completion_tokens = 0;  // total so far
};

// Called on the loop thread; must return quickly (hand the update to a queue, not a socket).
using UpdateSink = std::function<void(const RequestUpdate&)>;

struct EngineLoopOptions {
  // Requests admitted to the engine but not finished; beyond it Submit answers
  // ResourceExhausted so that the caller can shed load (HTTP 429) instead of queueing forever.
  int max_in_flight = 256;
};

struct LoopLoad {
  int in_flight = 0;  // admitted requests plus places reserved for handed-off ones
  int waiting = 0;
  int running = 0;
  int free_blocks = 0;
  int total_blocks = 0;
  std::int64_t steps = 0;
  std::int64_t prefill_steps = 0;   // steps that computed prompt tokens
  std::int64_t prefill_chunks = 0;  // prompt chunks those steps computed
  std::int64_t prefill_tokens = 0;  // prompt tokens those steps computed
  std::int64_t queued_prefill_tokens = 0;  // prompt tokens admitted and not yet computed
  // Wall time of the steps that computed prompt tokens: prefill_tokens / this is the prefill
  // speed this worker measured on its own work (what a prefill autoscaler divides backlog by).
  double prefill_busy_seconds = 0;
};

// Owns an Engine and drives it on one thread: the engine is single-threaded by design, and every
// other thread (gRPC handlers, HTTP handlers) talks to it through this loop.
class EngineLoop {
 public:
  EngineLoop(std::unique_ptr<engine::Engine> engine, const EngineLoopOptions& options);
  // Finishes every in-flight request as cancelled, then joins the thread.
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Queues a request. The engine's validation errors come back here, synchronously, and a
  // rejected request leaves nothing behind.
  absl::Status Submit(const std::string& request_id, std::vector<std::int32_t> prompt,
                      const engine::SamplingParams& params, UpdateSink sink);
  // As Submit, for requests that enter the engine another way (e.g. with KV handed off by a
  // prefill worker): `add` runs on the loop thread and must add `request_id` to the engine.
  // With `uses_reserved_place`, the request takes a place ReservePlace() held for it: it is not
  // refused for capacity, and the place is consumed whatever the outcome.
  absl::Status SubmitWith(const std::string& request_id, UpdateSink sink,
                          std::function<absl::Status(engine::Engine&)> add,
                          bool uses_reserved_place = false);

  // Holds one of the max_in_flight places for a request that arrives later (a KV handoff is
  // reserved before its prefill runs): the decode side's capacity is secured before the prompt
  // is computed, so a request whose first token has gone out is never refused. `also` runs on
  // the loop thread with the place taken; if it fails, the place is given back. ResourceExhausted
  // when every place is taken.
  absl::Status ReservePlace(std::function<absl::Status(engine::Engine&)> also);
  // Gives back a place whose request will not arrive (its handoff expired or was abandoned).
  void ReleasePlace();
  // Idempotent; unknown ids are ignored (the request may have just finished).
  void Cancel(const std::string& request_id);

  // Runs `fn` on the loop thread between steps and returns its status (KV import/export and
  // other operations that must not race a step).
  absl::Status RunOnLoop(std::function<absl::Status(engine::Engine&)> fn);

  LoopLoad load() const;
  const model::ModelConfig& model_config() const { return model_config_; }

 private:
  using Task = std::function<void()>;
  void Run();
  bool Post(Task task);  // false once the loop is stopping
  void Dispatch(const std::vector<engine::StepOutput>& outputs);
  // Ends every request in flight with `reason`, telling each sink.
  void EndAll(engine::FinishReason reason, const std::string& error);
  void FailAll(const std::string& error);
  void PublishLoad();
  bool AtCapacity() const;  // loop thread

  std::unique_ptr<engine::Engine> engine_;
  const EngineLoopOptions options_;
  const model::ModelConfig model_config_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Task> tasks_;
  bool stopping_ = false;
  LoopLoad load_;

  // Loop-thread only.
  struct Active {
    UpdateSink sink;
    int completion_tokens = 0;
  };
  absl::flat_hash_map<std::string, Active> active_;
  int reserved_places_ = 0;
  double prefill_busy_seconds_ = 0;

  std::thread thread_;
};

}  // namespace tandem::serving
