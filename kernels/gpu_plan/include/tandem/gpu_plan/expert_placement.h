#pragma once
// Which rank holds which routed experts under expert parallelism (EP), as a table that a later
// load balancer can change while the model keeps serving.

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem::gpu_plan {

// One place an expert's weights live: slot `slot` of rank `rank`.
struct ExpertSlot {
  int rank = 0;
  int slot = 0;
  friend bool operator==(const ExpertSlot&, const ExpertSlot&) = default;
};

// One change a load balancer asks for: put `expert` into (rank, slot), replacing what was there.
struct SlotAssignment {
  ExpertSlot at;
  int expert = 0;
};

// Every rank has the same number of expert slots (its weight memory is sized per slot at
// startup), so the table is ranks x slots_per_rank, each slot holding an expert id or kEmpty.
//
// Replicas are allowed: an expert may sit in slots of several ranks, as DeepSeek's EPLB gives hot
// experts redundant copies; a rank never holds the same expert twice (a second copy on the same
// rank adds memory and no compute). Every expert has at least one slot at all times, so a routing
// decision can always be served: the table refuses any change that would orphan an expert.
//
// Which replica serves a token is a function of the token's key alone (ReplicaFor), never of load,
// so the routing of a given batch is reproducible. That the replicas produce the same bits depends
// on the grouped expert GEMM being batch invariant, which the GPU kernels do not guarantee yet
// (docs/cuda.md).
class ExpertPlacement {
 public:
  static constexpr int kEmpty = -1;

  // The initial placement, without load information: rank r holds the contiguous experts
  // [r * E / R, (r + 1) * E / R), so counts differ by at most one. Contiguous rather than
  // round-robin because DeepSeek's group-limited routing picks experts from a few contiguous
  // groups: contiguous placement sends a token to fewer ranks. Slots left over stay empty for the
  // load balancer to fill with replicas.
  static absl::StatusOr<ExpertPlacement> Balanced(int num_experts, int num_ranks,
                                                  int slots_per_rank);
  // A table given slot by slot (rank-major: slot_experts[rank * slots_per_rank + slot]), e.g.
  // read back from a balancer; validated as Validate() describes.
  static absl::StatusOr<ExpertPlacement> FromTable(int num_experts, int num_ranks,
                                                   int slots_per_rank,
                                                   std::vector<int> slot_experts);

  int num_experts() const { return num_experts_; }
  int num_ranks() const { return num_ranks_; }
  int slots_per_rank() const { return slots_per_rank_; }
  // Bumped by every successful Apply, so a worker can tell that its copy of the weights is stale.
  std::uint64_t version() const { return version_; }

  // The expert in (rank, slot), or kEmpty. Precondition: rank and slot in range.
  int ExpertAt(ExpertSlot at) const;
  // Every slot holding `expert`, in (rank, slot) order. Precondition: expert in range.
  std::span<const ExpertSlot> Replicas(int expert) const;
  // The replica that serves a token with this key (e.g. its index in the batch).
  ExpertSlot ReplicaFor(int expert, std::uint64_t token_key) const;
  // Experts held by `rank`, in slot order, empty slots left out.
  std::vector<int> ExpertsOn(int rank) const;

  // Applies all assignments or none: the table they produce must pass Validate(), so a batch of
  // moves may shuffle experts as long as none is orphaned at the end. Each assignment must name
  // a slot in range; two assignments to the same slot are refused as ambiguous.
  absl::Status Apply(std::span<const SlotAssignment> moves);

  // The slots whose expert differs between two placements of the same shape: the weight copies a
  // worker has to make to go from `from` to `to`.
  static absl::StatusOr<std::vector<SlotAssignment>> Diff(const ExpertPlacement& from,
                                                          const ExpertPlacement& to);

 private:
  ExpertPlacement(int num_experts, int num_ranks, int slots_per_rank, std::vector<int> slots);
  static absl::Status Validate(int num_experts, int num_ranks, int slots_per_rank,
                               std::span<const int> slot_experts);
  void RebuildReplicas();

  int num_experts_ = 0;
  int num_ranks_ = 0;
  int slots_per_rank_ = 0;
  std::uint64_t version_ = 0;
  std::vector<int> slot_experts_;  // rank-major
  // Replicas of expert e: replicas_[replica_begin_[e] .. replica_begin_[e + 1]).
  std::vector<ExpertSlot> replicas_;
  std::vector<int> replica_begin_;
};

}  // namespace tandem::gpu_plan
