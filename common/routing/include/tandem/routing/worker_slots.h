#pragma once

#include <array>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "tandem/routing/types.h"

namespace tandem::routing {

// The router's worker ids -> the dense slots the index and policies use. A worker keeps its slot
// across re-registrations (a new incarnation is the index's business); a released slot is reused
// only after every other free slot, so late events for a departed worker are unlikely to land on
// its successor before the router has dropped them.
class WorkerSlots {
 public:
  // The worker's slot, assigning the next free one; ResourceExhausted beyond kMaxWorkers.
  absl::StatusOr<WorkerSlot> Assign(const std::string& worker_id);
  // kNoWorker when unknown.
  WorkerSlot Find(const std::string& worker_id) const;
  void Release(const std::string& worker_id);
  const std::string* IdOf(WorkerSlot slot) const;
  int size() const { return static_cast<int>(slots_.size()); }

 private:
  absl::flat_hash_map<std::string, WorkerSlot> slots_;
  std::array<std::string, kMaxWorkers> ids_{};
  std::array<bool, kMaxWorkers> used_{};
  int next_ = 0;  // where the search for a free slot starts
};

}  // namespace tandem::routing
