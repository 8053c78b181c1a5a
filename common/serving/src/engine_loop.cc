#include "tandem/serving/engine_loop.h"

#include <chrono>
#include <future>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem::serving {

EngineLoop::EngineLoop(std::unique_ptr<engine::Engine> engine, const EngineLoopOptions& options)
    : engine_(std::move(engine)),
      options_(options),
      model_config_(engine_->model_config()),
      thread_([this] { Run(); }) {}

EngineLoop::~EngineLoop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

bool EngineLoop::Post(Task task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Checked under the same lock the loop takes before exiting, so an accepted task always runs.
    if (stopping_) return false;
    tasks_.push_back(std::move(task));
  }
  wake_.notify_one();
  return true;
}

absl::Status EngineLoop::RunOnLoop(std::function<absl::Status(engine::Engine&)> fn) {
  auto done = std::make_shared<std::promise<absl::Status>>();
  auto result = done->get_future();
  if (!Post([this, fn = std::move(fn), done] { done->set_value(fn(*engine_)); })) {
    return absl::UnavailableError("engine is shutting down");
  }
  return result.get();
}

absl::Status EngineLoop::Submit(const std::string& request_id, std::vector<std::int32_t> prompt,
                                const engine::SamplingParams& params, UpdateSink sink) {
  return SubmitWith(request_id, std::move(sink), [&](engine::Engine& engine) {
    return engine.AddRequest(request_id, prompt, params);
  });
}

bool EngineLoop::AtCapacity() const {
  return static_cast<int>(active_.size()) + reserved_places_ >= options_.max_in_flight;
}

absl::Status EngineLoop::SubmitWith(const std::string& request_id, UpdateSink sink,
                                    std::function<absl::Status(engine::Engine&)> add,
                                    bool uses_reserved_place) {
  return RunOnLoop([&](engine::Engine& engine) -> absl::Status {
    if (uses_reserved_place) {
      if (reserved_places_ > 0) --reserved_places_;
    } else if (AtCapacity()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("engine queue is full (", options_.max_in_flight, " requests in flight)"));
    }
    absl::Status st = add(engine);
    if (!st.ok()) return st;
    active_[request_id] = Active{std::move(sink), 0};
    return absl::OkStatus();
  });
}

absl::Status EngineLoop::ReservePlace(std::function<absl::Status(engine::Engine&)> also) {
  return RunOnLoop([&](engine::Engine& engine) -> absl::Status {
    if (AtCapacity()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("engine queue is full (", options_.max_in_flight,
                       " requests in flight or reserved)"));
    }
    absl::Status st = also(engine);
    if (!st.ok()) return st;
    ++reserved_places_;
    return absl::OkStatus();
  });
}

void EngineLoop::ReleasePlace() {
  // At shutdown the post is refused, and nothing needs the count any more.
  Post([this] {
    if (reserved_places_ > 0) --reserved_places_;
  });
}

void EngineLoop::Cancel(const std::string& request_id) {
  Post([this, request_id] {
    if (active_.contains(request_id)) engine_->Cancel(request_id).IgnoreError();
  });  // during shutdown every request is cancelled anyway
}

LoopLoad EngineLoop::load() const {
  std::lock_guard<std::mutex> lock(mu_);
  return load_;
}

void EngineLoop::Run() {
  for (;;) {
    std::deque<Task> tasks;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stopping_ || !tasks_.empty() || engine_->HasPendingWork(); });
      if (stopping_) break;
      tasks.swap(tasks_);
    }
    for (Task& task : tasks) task();
    if (engine_->HasPendingWork()) {
      const std::int64_t prefill_before = engine_->num_prefill_tokens();
      const auto step_start = std::chrono::steady_clock::now();
      auto outputs = engine_->Step();
      // A mixed step is charged whole to prefill: on a prefill worker steps are nearly all
      // prompt tokens, and on a decode worker the figure is not used.
      if (engine_->num_prefill_tokens() != prefill_before) {
        prefill_busy_seconds_ +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
      }
      if (outputs.ok()) {
        Dispatch(*outputs);
      } else {
        // A failed forward leaves the batch's KV undefined: fail everything in flight rather than
        // continue on possibly corrupt state.
        FailAll(std::string(outputs.status().message()));
      }
    }
    PublishLoad();
  }
  // Shutdown: pending tasks (e.g. a Submit waiting on its promise) get an answer, requests end.
  std::deque<Task> tasks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks.swap(tasks_);
  }
  for (Task& task : tasks) task();
  EndAll(engine::FinishReason::kCancelled, "");
}

void EngineLoop::Dispatch(const std::vector<engine::StepOutput>& outputs) {
  std::vector<std::pair<UpdateSink, RequestUpdate>> deliveries;
  deliveries.reserve(outputs.size());
  for (const engine::StepOutput& out : outputs) {
    auto it = active_.find(out.request_id);
    if (it == active_.end()) continue;
    Active& active = it->second;
    active.completion_tokens += static_cast<int>(out.new_tokens.size());
    RequestUpdate update;
    update.new_tokens = out.new_tokens;
    update.finished = out.finished;
    update.finish_reason = out.finish_reason;
    update.error = out.error;
    update.image_rows_missing = out.image_rows_missing;
    update.prompt_tokens = out.prompt_tokens;
    update.cached_tokens = out.cached_tokens;
    update.completion_tokens = active.completion_tokens;
    if (out.finished) {
      deliveries.emplace_back(std::move(active.sink), std::move(update));
      active_.erase(it);
    } else {
      deliveries.emplace_back(active.sink, std::move(update));
    }
  }
  // Load first, so that whoever hears "finished" already sees the request gone from it.
  PublishLoad();
  for (auto& [sink, update] : deliveries) sink(update);
}

void EngineLoop::PublishLoad() {
  const engine::EngineStats stats = engine_->stats();
  std::lock_guard<std::mutex> lock(mu_);
  load_.in_flight = static_cast<int>(active_.size()) + reserved_places_;
  load_.waiting = stats.num_waiting;
  load_.running = stats.num_running;
  load_.free_blocks = stats.num_free_blocks;
  load_.total_blocks = stats.num_blocks;
  load_.steps = stats.num_steps;
  load_.prefill_steps = stats.num_prefill_steps;
  load_.prefill_chunks = stats.num_prefill_chunks;
  load_.prefill_tokens = stats.num_prefill_tokens;
  load_.queued_prefill_tokens = stats.queued_prefill_tokens;
  load_.prefill_busy_seconds = prefill_busy_seconds_;
}

void EngineLoop::EndAll(engine::FinishReason reason, const std::string& error) {
  for (auto& [id, active] : active_) {
    engine_->Cancel(id).IgnoreError();
    RequestUpdate update;
    update.finished = true;
    update.finish_reason = reason;
    update.error = error;
    update.completion_tokens = active.completion_tokens;
    active.sink(update);
  }
  active_.clear();
}

void EngineLoop::FailAll(const std::string& error) {
  EndAll(engine::FinishReason::kError, error);
  // The cancellations above are reported by the next Step(); drain them so they are not
  // dispatched to sinks that already heard the error.
  if (engine_->HasPendingWork()) engine_->Step().IgnoreError();
}

}  // namespace tandem::serving
