#pragma once

#include <array>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "tandem/routing/types.h"

namespace tandem::routing {

// The router's hold queue in front of prefill workers: at most `depth` prefills are out on a
// worker at a time; the rest wait in the router, and when one finishes the shortest predicted
// prefill goes next (aged, so a long one is never held forever).
//
// Why in the router: a prefill worker runs what it was sent in order, so one long prompt sent
// ahead delays every short one behind it. Holding them where the order can still change lets
// short prompts pass, which lowers the TTFT of most requests at the cost of the longest ones
// (whose TTFT is dominated by their own compute anyway).
//
// Batching: a worker computes several prompts in one engine step when they fit its step's token
// budget. So beyond `depth`, a prefill also goes out while the uncached tokens out on its worker
// plus its own fit the worker's batch budget (SetBatchTokens; 0: no budget, depth alone). Held
// prefills leave in priority order and the first that does not fit stops the release, so the
// order is kept and a prompt longer than the budget goes alone once the worker is free.
//
// Priority: predicted seconds - aging x seconds held. All held requests age at the same rate, so
// the order is fixed at enqueue time: predicted + aging x enqueue time, smallest first.
// Not thread-safe: the router keeps it under its routing lock.
class PrefillQueue {
 public:
  struct Options {
    int depth = 1;        // prefills out per worker; 0 = never hold
    double aging = 0.1;   // seconds of priority gained per second held
  };
  using Ticket = std::uint64_t;

  explicit PrefillQueue(Options options) : options_(options) {}
  PrefillQueue() : PrefillQueue(Options{}) {}

  // A prefill routed to `worker`, predicted to take `predicted_seconds`. True: it may start now;
  // false: it is held until Done() of an earlier one releases it. Tickets must be unique among
  // those not yet Done.
  // `tokens` is what the worker will compute (the uncached part), counted against its budget.
  bool Enqueue(Ticket ticket, WorkerSlot worker, double predicted_seconds, double now_seconds,
               std::int64_t tokens = 0);

  // The worker's step budget in tokens (0: none; depth alone limits what is out).
  void SetBatchTokens(WorkerSlot worker, std::int64_t tokens);

  // The prefill `ticket` finished, failed or was abandoned, held or out. A prefill that was out
  // frees its worker's place, and the tickets released by that are returned (to start now).
  // Unknown tickets are ignored.
  std::vector<Ticket> Done(Ticket ticket);

  // Everything held for `worker` goes out now (the worker left routing: its requests should fail
  // or finish rather than wait for completions that will never come).
  std::vector<Ticket> ReleaseAll(WorkerSlot worker);

  // A prefill that is out ran one piece of its prompt (docs/routing.md, rule 11): its place is
  // freed and it is held again for the same worker with the rest (`predicted_seconds`, `tokens`),
  // keeping its time in the queue, so a shorter held prefill may go first. The tickets released
  // (it may be one of them: then it goes on at once). Nothing for a ticket that is not out.
  std::vector<Ticket> Requeue(Ticket ticket, double predicted_seconds, std::int64_t tokens);

  bool IsHeld(Ticket ticket) const;
  // The tickets held for `worker`, in release order.
  std::vector<Ticket> HeldFor(WorkerSlot worker) const;
  // A held ticket moves to `to` with its prediction and tokens there, keeping its time in the
  // queue; it starts at once where `to` has room and nothing held. True when it started.
  bool Move(Ticket ticket, WorkerSlot to, double predicted_seconds, std::int64_t tokens);
  std::size_t total_held() const { return tickets_.size() - total_out_; }
  int held(WorkerSlot worker) const { return static_cast<int>(workers_[worker].held.size()); }
  int out(WorkerSlot worker) const { return workers_[worker].out; }
  // Uncached tokens of the prefills out on `worker`, and of one ticket (0 when unknown).
  std::int64_t out_tokens(WorkerSlot worker) const { return workers_[worker].out_tokens; }
  std::int64_t tokens(Ticket ticket) const;
  const Options& options() const { return options_; }

 private:
  struct PerWorker {
    int out = 0;
    std::int64_t out_tokens = 0;
    std::int64_t batch_tokens = 0;
    std::set<std::pair<double, Ticket>> held;  // (priority key, ticket)
  };
  struct Entry {
    WorkerSlot worker = kNoWorker;
    bool held = false;
    double key = 0;
    double enqueued = 0;
    std::int64_t tokens = 0;
  };
  bool MayStart(const PerWorker& w, std::int64_t tokens) const;
  // Starts `entry` on its worker where it may, else holds it there (Enqueue and Move).
  bool Place(Ticket ticket, Entry* entry, double predicted_seconds);
  void Start(WorkerSlot worker, Entry* entry);
  void ReleaseNext(WorkerSlot worker, std::vector<Ticket>* released);
  void ReleaseFitting(WorkerSlot worker, std::vector<Ticket>* released);

  Options options_;
  std::array<PerWorker, kMaxWorkers> workers_{};
  absl::flat_hash_map<Ticket, Entry> tickets_;
  std::size_t total_out_ = 0;
};

// The router holds prefills for its own policy only; the baselines dispatch at once, as their
// published rules do (and as tandem-sim replays them).
inline bool PolicyHoldsPrefills(absl::string_view policy_name) { return policy_name == "tandem"; }

}  // namespace tandem::routing
