#include "tandem/routing/worker_slots.h"

#include "absl/strings/str_cat.h"

namespace tandem::routing {

absl::StatusOr<WorkerSlot> WorkerSlots::Assign(const std::string& worker_id) {
  if (auto it = slots_.find(worker_id); it != slots_.end()) return it->second;
  for (int i = 0; i < kMaxWorkers; ++i) {
    const WorkerSlot slot = (next_ + i) % kMaxWorkers;
    if (used_[slot]) continue;
    used_[slot] = true;
    ids_[slot] = worker_id;
    slots_.emplace(worker_id, slot);
    next_ = (slot + 1) % kMaxWorkers;
    return slot;
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("cannot route to more than ", kMaxWorkers, " workers; '", worker_id,
                   "' has no slot"));
}

WorkerSlot WorkerSlots::Find(const std::string& worker_id) const {
  auto it = slots_.find(worker_id);
  return it == slots_.end() ? kNoWorker : it->second;
}

void WorkerSlots::Release(const std::string& worker_id) {
  auto it = slots_.find(worker_id);
  if (it == slots_.end()) return;
  used_[it->second] = false;
  ids_[it->second].clear();
  slots_.erase(it);
}

const std::string* WorkerSlots::IdOf(WorkerSlot slot) const {
  if (slot < 0 || slot >= kMaxWorkers || !used_[slot]) return nullptr;
  return &ids_[slot];
}

}  // namespace tandem::routing
