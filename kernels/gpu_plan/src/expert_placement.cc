#include "tandem/gpu_plan/expert_placement.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem::gpu_plan {

absl::Status ExpertPlacement::Validate(int num_experts, int num_ranks, int slots_per_rank,
                                       std::span<const int> slot_experts) {
  if (num_experts <= 0 || num_ranks <= 0 || slots_per_rank <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("expert placement needs positive sizes, got ",
                                                   num_experts, " experts, ", num_ranks,
                                                   " ranks, ", slots_per_rank, " slots per rank"));
  }
  if (slot_experts.size() != static_cast<std::size_t>(num_ranks) * slots_per_rank) {
    return absl::InvalidArgumentError(absl::StrCat("expert placement table has ",
                                                   slot_experts.size(), " slots, expected ",
                                                   num_ranks, " x ", slots_per_rank));
  }
  std::vector<int> copies(num_experts, 0);
  for (int r = 0; r < num_ranks; ++r) {
    std::vector<bool> on_rank(num_experts, false);
    for (int s = 0; s < slots_per_rank; ++s) {
      const int e = slot_experts[static_cast<std::size_t>(r) * slots_per_rank + s];
      if (e == kEmpty) continue;
      if (e < 0 || e >= num_experts) {
        return absl::InvalidArgumentError(
            absl::StrCat("rank ", r, " slot ", s, " holds expert ", e, ", outside [0, ",
                         num_experts, ")"));
      }
      if (on_rank[e]) {
        return absl::InvalidArgumentError(
            absl::StrCat("expert ", e, " is on rank ", r, " twice"));
      }
      on_rank[e] = true;
      ++copies[e];
    }
  }
  for (int e = 0; e < num_experts; ++e) {
    if (copies[e] == 0) {
      return absl::FailedPreconditionError(absl::StrCat("expert ", e, " has no slot"));
    }
  }
  return absl::OkStatus();
}

ExpertPlacement::ExpertPlacement(int num_experts, int num_ranks, int slots_per_rank,
                                 std::vector<int> slots)
    : num_experts_(num_experts),
      num_ranks_(num_ranks),
      slots_per_rank_(slots_per_rank),
      slot_experts_(std::move(slots)) {
  RebuildReplicas();
}

absl::StatusOr<ExpertPlacement> ExpertPlacement::Balanced(int num_experts, int num_ranks,
                                                          int slots_per_rank) {
  if (num_experts <= 0 || num_ranks <= 0 || slots_per_rank <= 0) {
    return Validate(num_experts, num_ranks, slots_per_rank, {});
  }
  // The busiest rank holds ceil(E / R) experts.
  if ((num_experts + num_ranks - 1) / num_ranks > slots_per_rank) {
    return absl::InvalidArgumentError(absl::StrCat(num_experts, " experts do not fit on ",
                                                   num_ranks, " ranks of ", slots_per_rank,
                                                   " slots"));
  }
  std::vector<int> slots(static_cast<std::size_t>(num_ranks) * slots_per_rank, kEmpty);
  for (int r = 0; r < num_ranks; ++r) {
    const int first = static_cast<int>(static_cast<std::int64_t>(r) * num_experts / num_ranks);
    const int last = static_cast<int>(static_cast<std::int64_t>(r + 1) * num_experts / num_ranks);
    for (int e = first; e < last; ++e) {
      slots[static_cast<std::size_t>(r) * slots_per_rank + (e - first)] = e;
    }
  }
  return ExpertPlacement(num_experts, num_ranks, slots_per_rank, std::move(slots));
}

absl::StatusOr<ExpertPlacement> ExpertPlacement::FromTable(int num_experts, int num_ranks,
                                                           int slots_per_rank,
                                                           std::vector<int> slot_experts) {
  if (absl::Status s = Validate(num_experts, num_ranks, slots_per_rank, slot_experts); !s.ok()) {
    return s;
  }
  return ExpertPlacement(num_experts, num_ranks, slots_per_rank, std::move(slot_experts));
}

void ExpertPlacement::RebuildReplicas() {
  // Counting sort by expert keeps each expert's replicas in (rank, slot) order.
  replica_begin_.assign(num_experts_ + 1, 0);
  for (int e : slot_experts_) {
    if (e != kEmpty) ++replica_begin_[e + 1];
  }
  for (int e = 0; e < num_experts_; ++e) replica_begin_[e + 1] += replica_begin_[e];
  replicas_.resize(replica_begin_[num_experts_]);
  std::vector<int> next(replica_begin_.begin(), replica_begin_.end() - 1);
  for (int r = 0; r < num_ranks_; ++r) {
    for (int s = 0; s < slots_per_rank_; ++s) {
      const int e = slot_experts_[static_cast<std::size_t>(r) * slots_per_rank_ + s];
      if (e != kEmpty) replicas_[next[e]++] = ExpertSlot{r, s};
    }
  }
}

int ExpertPlacement::ExpertAt(ExpertSlot at) const {
  return slot_experts_[static_cast<std::size_t>(at.rank) * slots_per_rank_ + at.slot];
}

std::span<const ExpertSlot> ExpertPlacement::Replicas(int expert) const {
  return std::span<const ExpertSlot>(replicas_)
      .subspan(replica_begin_[expert], replica_begin_[expert + 1] - replica_begin_[expert]);
}

ExpertSlot ExpertPlacement::ReplicaFor(int expert, std::uint64_t token_key) const {
  const std::span<const ExpertSlot> r = Replicas(expert);
  return r[token_key % r.size()];
}

std::vector<int> ExpertPlacement::ExpertsOn(int rank) const {
  std::vector<int> out;
  for (int s = 0; s < slots_per_rank_; ++s) {
    const int e = ExpertAt(ExpertSlot{rank, s});
    if (e != kEmpty) out.push_back(e);
  }
  return out;
}

absl::Status ExpertPlacement::Apply(std::span<const SlotAssignment> moves) {
  std::vector<int> next = slot_experts_;
  std::vector<bool> touched(next.size(), false);
  for (const SlotAssignment& m : moves) {
    if (m.at.rank < 0 || m.at.rank >= num_ranks_ || m.at.slot < 0 ||
        m.at.slot >= slots_per_rank_) {
      return absl::InvalidArgumentError(absl::StrCat("no slot ", m.at.slot, " on rank ",
                                                     m.at.rank, " (", num_ranks_, " ranks x ",
                                                     slots_per_rank_, " slots)"));
    }
    const std::size_t i = static_cast<std::size_t>(m.at.rank) * slots_per_rank_ + m.at.slot;
    if (touched[i]) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", m.at.rank, " slot ", m.at.slot,
                                                     " is assigned twice in one batch"));
    }
    touched[i] = true;
    next[i] = m.expert;
  }
  if (absl::Status s = Validate(num_experts_, num_ranks_, slots_per_rank_, next); !s.ok()) {
    return s;
  }
  slot_experts_ = std::move(next);
  RebuildReplicas();
  ++version_;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SlotAssignment>> ExpertPlacement::Diff(const ExpertPlacement& from,
                                                                  const ExpertPlacement& to) {
  if (from.num_experts_ != to.num_experts_ || from.num_ranks_ != to.num_ranks_ ||
      from.slots_per_rank_ != to.slots_per_rank_) {
    return absl::InvalidArgumentError("expert placements of different shapes");
  }
  std::vector<SlotAssignment> out;
  for (int r = 0; r < to.num_ranks_; ++r) {
    for (int s = 0; s < to.slots_per_rank_; ++s) {
      const ExpertSlot at{r, s};
      if (from.ExpertAt(at) != to.ExpertAt(at)) out.push_back({at, to.ExpertAt(at)});
    }
  }
  return out;
}

}  // namespace tandem::gpu_plan
