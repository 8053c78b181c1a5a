#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tandem/routing/policy.h"

namespace tandem::routing::internal {

// Available workers of one pool, without allocating.
struct SlotList {
  std::array<WorkerSlot, kMaxWorkers> slots{};
  int size = 0;
  WorkerMask mask = 0;

  void Add(WorkerSlot w) {
    slots[size++] = w;
    mask |= SlotBit(w);
  }
  bool empty() const { return size == 0; }
  const WorkerSlot* begin() const { return slots.data(); }
  const WorkerSlot* end() const { return slots.data() + size; }
};

inline bool TakesPrefill(Role role) { return role == Role::kPrefill || role == Role::kCombined; }

inline SlotList PrefillPool(const ClusterView& view) {
  SlotList list;
  for (const WorkerState& s : view.workers) {
    if (s.slot != kNoWorker && s.available && TakesPrefill(s.role)) list.Add(s.slot);
  }
  return list;
}

inline SlotList DecodePool(const ClusterView& view) {
  SlotList list;
  for (const WorkerState& s : view.workers) {
    if (s.slot != kNoWorker && s.available && s.role == Role::kDecode) list.Add(s.slot);
  }
  return list;
}

// Requests on a worker: the router's own count (exact, immediate) or what the worker last reported
// (late, but it includes work this router did not send), whichever is larger.
inline int Load(const WorkerState& s) { return std::max(s.in_flight, s.running + s.waiting); }

inline const WorkerState& StateOf(const ClusterView& view, WorkerSlot w) { return view.workers[w]; }

// Fewest requests in flight; ties to the lowest slot.
inline WorkerSlot LeastInFlight(const ClusterView& view, const SlotList& pool) {
  WorkerSlot best = kNoWorker;
  for (WorkerSlot w : pool) {
    if (best == kNoWorker || StateOf(view, w).in_flight < StateOf(view, best).in_flight) best = w;
  }
  return best;
}

inline std::int64_t BlocksOf(std::int64_t tokens, int block_size) {
  return block_size <= 0 ? 0 : (tokens + block_size - 1) / block_size;
}

// Prompt tokens covered by `blocks` leading blocks (the last block may be partial).
inline std::int64_t CoveredTokens(double blocks, const RouteRequest& request) {
  return std::min<std::int64_t>(request.prompt_tokens,
                                static_cast<std::int64_t>(blocks * request.block_size));
}

// The chosen worker's device-equivalent cached tokens per the index (0 without one).
inline std::int64_t PredictedCachedTokens(const ClusterView& view, const RouteRequest& request,
                                          WorkerSlot w, const TierCredits& credits = {}) {
  if (view.index == nullptr || w == kNoWorker) return 0;
  MatchResult match;
  view.index->Match(request.block_hashes, SlotBit(w), &match);
  return CoveredTokens(match[w].Credit(credits), request);
}

// Leading-run overlap of every pool member with the request (all zero without an index).
inline void MatchPool(const ClusterView& view, const RouteRequest& request, const SlotList& pool,
                      MatchResult* match) {
  if (view.index != nullptr) {
    view.index->Match(request.block_hashes, pool.mask, match);
  } else {
    match->workers.fill(WorkerOverlap{});
  }
}

inline absl::Status NoWorkerError(absl::string_view pool) {
  return absl::UnavailableError(absl::StrCat("no available ", pool, " worker"));
}

}  // namespace tandem::routing::internal
