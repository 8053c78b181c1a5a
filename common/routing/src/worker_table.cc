#include "tandem/routing/worker_state.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tandem::routing {

absl::Status WorkerTable::Add(WorkerSlot w, Role role) {
  if (w < 0 || w >= kMaxWorkers) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker slot ", w, " outside [0, ", kMaxWorkers, ")"));
  }
  if (static_cast<std::size_t>(w) >= states_.size()) states_.resize(w + 1);
  states_[w] = WorkerState{.slot = w,
                           .role = role,
                           .available = true,
                           .prefill_fit = PrefillSpeedFit(options_.ewma_alpha)};
  return absl::OkStatus();
}

WorkerState* WorkerTable::Mutable(WorkerSlot w) {
  if (w < 0 || static_cast<std::size_t>(w) >= states_.size()) return nullptr;
  WorkerState& s = states_[w];
  return s.slot == kNoWorker ? nullptr : &s;
}

const WorkerState* WorkerTable::Find(WorkerSlot w) const {
  return const_cast<WorkerTable*>(this)->Mutable(w);
}

absl::Status WorkerTable::SetAvailable(WorkerSlot w, bool available) {
  WorkerState* s = Mutable(w);
  if (s == nullptr) return absl::NotFoundError(absl::StrCat("worker slot ", w, " not added"));
  s->available = available;
  return absl::OkStatus();
}

absl::Status WorkerTable::Report(WorkerSlot w, int running, int waiting,
                                 std::int64_t total_kv_blocks, std::int64_t free_kv_blocks) {
  WorkerState* s = Mutable(w);
  if (s == nullptr) return absl::NotFoundError(absl::StrCat("worker slot ", w, " not added"));
  if (running < 0 || waiting < 0 || total_kv_blocks < 0 || free_kv_blocks < 0 ||
      free_kv_blocks > total_kv_blocks) {
    return absl::InvalidArgumentError(absl::StrCat("inconsistent load report from worker slot ", w));
  }
  s->running = running;
  s->waiting = waiting;
  s->total_kv_blocks = total_kv_blocks;
  s->free_kv_blocks = free_kv_blocks;
  return absl::OkStatus();
}

double WorkerTable::Ewma(double old_value, double sample) const {
  if (old_value <= 0) return sample;
  return old_value + options_.ewma_alpha * (sample - old_value);
}

void WorkerTable::OnPrefillDispatched(WorkerSlot w, std::int64_t uncached_tokens,
                                      std::int64_t blocks, double now_seconds) {
  WorkerState* s = Mutable(w);
  if (s == nullptr) return;
  if (s->in_flight == 0) s->prefill_head_started_seconds = now_seconds;
  ++s->in_flight;
  s->queued_prefill_tokens += uncached_tokens;
  s->active_blocks += blocks;
}

void WorkerTable::OnPrefillFinished(WorkerSlot w, std::int64_t uncached_tokens,
                                    std::int64_t blocks, std::int64_t computed_tokens,
                                    double compute_seconds, double now_seconds) {
  WorkerState* s = Mutable(w);
  if (s == nullptr) return;
  s->in_flight = std::max(0, s->in_flight - 1);
  // Prefill runs one queue per worker: the next request starts as this one ends.
  s->prefill_head_started_seconds = s->in_flight > 0 ? now_seconds : -1;
  s->queued_prefill_tokens = std::max<std::int64_t>(0, s->queued_prefill_tokens - uncached_tokens);
  s->active_blocks = std::max<std::int64_t>(0, s->active_blocks - blocks);
  if (computed_tokens > 0 && compute_seconds > 0) {
    s->prefill_fit.Add(static_cast<double>(computed_tokens), compute_seconds);
    s->prefill_seconds_per_token = s->prefill_fit.seconds_per_token();
  }
}

void WorkerTable::OnPrefillWithdrawn(WorkerSlot w, std::int64_t uncached_tokens,
                                     std::int64_t blocks) {
  WorkerState* s = Mutable(w);
  if (s == nullptr) return;
  s->in_flight = std::max(0, s->in_flight - 1);
  if (s->in_flight == 0) s->prefill_head_started_seconds = -1;
  s->queued_prefill_tokens = std::max<std::int64_t>(0, s->queued_prefill_tokens - uncached_tokens);
  s->active_blocks = std::max<std::int64_t>(0, s->active_blocks - blocks);
}

void WorkerTable::OnDecodeDispatched(WorkerSlot w, std::int64_t blocks) {
  WorkerState* s = Mutable(w);
  if (s == nullptr) return;
  ++s->in_flight;
  s->active_blocks += blocks;
}

void WorkerTable::OnDecodeFinished(WorkerSlot w, std::int64_t blocks) {
  WorkerState* s = Mutable(w);
  if (s == nullptr) return;
  s->in_flight = std::max(0, s->in_flight - 1);
  s->active_blocks = std::max<std::int64_t>(0, s->active_blocks - blocks);
}

void WorkerTable::OnDecodeStep(WorkerSlot w, int batch, double seconds) {
  WorkerState* s = Mutable(w);
  if (s == nullptr || batch <= 0 || seconds <= 0) return;
  s->decode_step_seconds = Ewma(s->decode_step_seconds, seconds);
}

}  // namespace tandem::routing
