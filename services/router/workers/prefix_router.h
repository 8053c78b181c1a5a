#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "async/event.h"
#include "async/task.h"
#include "dispatch/call_canceller.h"
#include "tandem/routing/kv_index.h"
#include "tandem/routing/policy.h"
#include "tandem/routing/prefill_pieces.h"
#include "tandem/routing/prefill_queue.h"
#include "tandem/routing/warm_up.h"
#include "tandem/routing/worker_slots.h"
#include "tandem/routing/worker_state.h"
#include "tandem/v1/router_control.pb.h"
#include "workers/worker_registry.h"

namespace tandem::router {

// The router's routing core: the global KV prefix index fed by the workers' KV events, the worker
// table fed by heartbeats and by dispatch/completion, and the configured policy. One mutex guards
// all of it; ingest and decisions take microseconds. Thread-safe.
//
// Liveness stays the registry's (leases); this adds the KV-event side of health: a worker whose
// heartbeats report events the router has not received a whole heartbeat period later is out of
// routing (its event stream stopped) until a snapshot re-syncs it.
class PrefixRouter {
 public:
  struct Options {
    int block_size = 16;
    std::string policy = "tandem";
    std::size_t max_index_blocks = std::size_t{1} << 20;
    // The tandem policy's hold queue (routing::PrefillQueue): prefills out per prefill worker (0:
    // none held) and the priority a held one gains per second.
    int prefill_hold_depth = 1;
    double prefill_hold_aging = 0.1;
    // Held prefills that together fit this many uncached tokens go out to a worker at once, to
    // be computed in one engine step. -1: each worker's announced step budget; 0: no batching.
    int prefill_batch_tokens = -1;
    // The tandem policy's warm-ups (routing::WarmUpPlanner, docs/routing.md rule 9): a hot prefix
    // copied onto an idle prefill worker, computed there alone.
    bool warm_ups = true;
    // Late binding (routing::PickHeldMove, docs/routing.md rule 10): a prefill worker that falls
    // idle takes over a prefill held for a busy one.
    bool held_moves = true;
    // Prefills in pieces (routing::NextPiece, docs/routing.md rule 11): a long prompt's
    // leading part goes to its worker as a piece of its own and the rest waits in the hold queue
    // again, so a shorter prefill may pass it. piece_seconds 0: whole prompts.
    routing::PrefillPieceOptions prefill_pieces;
    const RouterMetrics* metrics = nullptr;  // optional: the hold queue's gauge and histogram
    SteadyNow now = [] { return std::chrono::steady_clock::now(); };
  };
  static absl::StatusOr<std::unique_ptr<PrefixRouter>> Create(Options options);
  // Warm-ups still in flight then finish without telling it.
  ~PrefixRouter();

  // A worker the registry accepted. A new incarnation forgets what the previous one held.
  absl::Status OnRegistered(const v1::WorkerInfo& info);
  // Returns whether the worker must resend its KV snapshot.
  bool OnHeartbeat(const v1::HeartbeatRequest& heartbeat);
  // One batch from a worker's PublishKvEvents stream.
  v1::KvEventAck OnEvents(const v1::KvEventBatch& batch);
  // The worker said it is draining: out of routing now, and the prefills held for it leave the
  // hold queue at once (their start gate sees the drain and places them again elsewhere).
  void OnDraining(const std::string& worker_id, std::uint64_t incarnation);
  // The registry forgot this registration (deregistered): its slot, index entries and held
  // prefills go. Another incarnation under the same id is left alone.
  void OnDeregistered(const std::string& worker_id, std::uint64_t incarnation);

  // Candidates of one decision: the registry's healthy workers (per role). A prefill is paired
  // only with a decode of the same kv_layout_id (KvCompatible), preferring one of its generation.
  struct Candidates {
    std::vector<WorkerView> prefill;  // prefill or combined workers
    std::vector<WorkerView> decode;   // empty: the prefill worker decodes
  };
  struct Choice {
    std::shared_ptr<WorkerEntry> prefill;
    std::shared_ptr<WorkerEntry> decode;  // null without a decode pool
    std::int64_t predicted_cached_tokens = 0;
    // Accounting handles: pass them to the lease hooks below.
    int prefill_ticket = -1;
    int decode_ticket = -1;
    // The prefill must wait for its turn (PrefillTurn) before it starts.
    bool held = false;
    // Its prompt may go in pieces (RunPrefillPiece) once its turn has come.
    bool may_cut = false;
    // A warm-up to send now (Prefill with warm_up set) to this idle prefill worker: the prompt's
    // first warm_up_tokens tokens. Its end, however it ends, goes to PrefillFinished with
    // warm_up_ticket (that also learns the worker's speed from it).
    std::shared_ptr<WorkerEntry> warm_up;
    std::int64_t warm_up_tokens = 0;
    int warm_up_ticket = -1;
  };
  // `kv_hash_root`: the parent of the prompt's first block (a cache salt's root; 0: unsalted), so
  // a salted prompt matches only blocks its salt stored.
  absl::StatusOr<Choice> Choose(std::span<const std::int32_t> prompt, const Candidates& candidates,
                                std::int64_t max_output_tokens = 0, std::uint64_t kv_hash_root = 0);

  // Ends the accounting of a dispatched prefill: measured, when the worker answered, else without
  // a speed sample (it failed or the request was cancelled first).
  void PrefillFinished(int ticket, const v1::PrefillResponse* response);
  // Sends the choice's warm-up, if it has one, without waiting: a Prefill with warm_up set of the
  // prompt's first warm_up_tokens tokens under `kv_hash_root`; its end reaches PrefillFinished.
  void SendWarmUp(const Choice& choice, std::span<const std::int32_t> prompt,
                  std::uint64_t kv_hash_root);
  // Completes once the prefill is no longer held: once it may start, with the worker it was moved
  // to while held (empty: the one chosen); the canceller's reason or DEADLINE_EXCEEDED otherwise
  // (the prefill then leaves the queue). Resumes on `executor`.
  async::Task<absl::StatusOr<std::optional<WorkerLease::Moved>>> PrefillTurn(
      int ticket, async::Executor* executor, CallCanceller* canceller,
      std::chrono::system_clock::time_point deadline);
  // Rule 11: once the prefill `ticket` has its turn on `worker`, sends the leading piece of its
  // prompt there when one is due (a warm-up of that prefix) and waits for it. The prompt tokens
  // the piece computed when one ran: the rest is held again, so wait for the turn again
  // (PrefillTurn). Nothing when the rest goes in one prefill, also after a piece failed (the
  // prefill itself then meets whatever the worker's state is). The canceller's reason when the
  // request gave up.
  async::Task<absl::StatusOr<std::optional<std::int64_t>>> RunPrefillPiece(
      int ticket, std::span<const std::int32_t> prompt, std::uint64_t kv_hash_root,
      std::shared_ptr<WorkerEntry> worker, async::Executor* executor, CallCanceller* canceller,
      std::chrono::system_clock::time_point deadline);
  bool PrefillHeld(int ticket);
  void DecodeFinished(int ticket);

  // Chained hashes of the prompt's full blocks (what workers publish for the same tokens).
  std::vector<routing::BlockHash> BlockHashes(std::span<const std::int32_t> prompt,
                                              std::uint64_t kv_hash_root = 0) const;

  // For tests and metrics.
  bool Routable(const std::string& worker_id);
  std::int64_t IndexedBlocks(const std::string& worker_id);
  int WarmUpsInFlight();
  absl::string_view policy_name() const { return policy_->name(); }

 private:
  // Per slot: what the router knows of the worker beyond the index and table.
  struct SlotInfo {
    std::uint64_t incarnation = 0;
    bool known = false;       // the index has this incarnation
    bool registered = false;  // and the table has it (it registered)
    std::uint64_t generation = 0;  // bumps with each incarnation: late completions are ignored
    double last_heard = 0;         // seconds on `now`: picks the slot to reuse when all are taken
    std::uint64_t claimed_seq = 0;  // last_kv_event_seq of the previous heartbeat
    double last_prefill_end = -1;   // seconds on `now`, for per-prefill compute time
    std::weak_ptr<WorkerEntry> entry;  // as last chosen: where a held prefill can move to
  };
  // One dispatched prefill or decode, until it finishes.
  struct Ticket {
    bool used = false;
    routing::WorkerSlot slot = routing::kNoWorker;
    std::uint64_t generation = 0;
    std::int64_t uncached_tokens = 0;
    std::int64_t prompt_tokens = 0;
    std::int64_t blocks = 0;
    double dispatched = 0;
    bool warm_up = false;                    // a warm-up's, not a request's
    routing::BlockHash warm_up_run_end = 0;  // the planner's key for it
    // A held prefill's: its prompt's blocks and decode (a move needs both), and where it was
    // moved, from when (its compute starts no earlier), with what predicted cached.
    std::vector<routing::BlockHash> chain;
    routing::WorkerSlot decode_slot = routing::kNoWorker;
    std::shared_ptr<WorkerEntry> moved_to;
    double moved_at = -1;
    std::int64_t moved_cached_tokens = 0;
    bool hold_observed = false;  // its wait in the hold queue went to the histogram
    // Its pieces (rule 11): where the last one sent ends (prompt tokens on its current worker),
    // when it was sent and its predicted share of the uncached tokens.
    std::int64_t piece_end = 0;
    double piece_started = -1;
    std::int64_t piece_uncached = 0;
  };

  explicit PrefixRouter(Options options, std::unique_ptr<routing::Policy> policy);
  double Seconds() const;
  absl::StatusOr<routing::WorkerSlot> SlotFor(const std::string& worker_id,
                                              std::uint64_t incarnation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int NewTicket(const Ticket& ticket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool TicketLive(int ticket) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PublishHeld() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The slot of this incarnation of `worker_id`, or kNoWorker.
  routing::WorkerSlot SlotOfLocked(const std::string& worker_id, std::uint64_t incarnation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetAvailabilityLocked(routing::WorkerMask available) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `idle` has nothing out or held: it may take over one prefill held for a busy worker.
  void MoveHeldToLocked(routing::WorkerSlot idle, double now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Where the piece the prefill `ticket` should send now ends (prompt tokens), if one is due; it
  // is then booked as sent.
  std::optional<std::int64_t> NextPieceLocked(int ticket, std::span<const std::int32_t> prompt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A piece ending at `piece_end` was answered: its accounting, and what it computed.
  std::int64_t PieceDone(int ticket, std::int64_t piece_end, const v1::PrefillResponse& response);
  // A warm-up (rule 9) or a piece (rule 11; `kind` "piece-") of `prefix`: a Prefill with
  // warm_up set, under an id unique to this router.
  v1::PrefillRequest WarmUpRequest(std::span<const std::int32_t> prefix, std::uint64_t kv_hash_root,
                                   absl::string_view kind);
  bool CutsPrefills() const;
  // Wakes the waiting prefills the hold queue let go.
  void WakeLocked(const std::vector<routing::PrefillQueue::Ticket>& released)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // What a warm-up's completion reaches the router through: cleared by the destructor, so a
  // completion that comes later touches nothing freed.
  struct Link {
    absl::Mutex mu;
    PrefixRouter* router ABSL_GUARDED_BY(mu) = nullptr;
  };

  const Options options_;
  const std::unique_ptr<routing::Policy> policy_;
  const std::shared_ptr<Link> link_ = std::make_shared<Link>();
  const std::chrono::steady_clock::time_point epoch_;
  absl::Mutex mu_;
  routing::KvIndex index_ ABSL_GUARDED_BY(mu_);
  routing::WorkerTable table_ ABSL_GUARDED_BY(mu_);
  routing::PrefillQueue hold_ ABSL_GUARDED_BY(mu_);
  routing::WarmUpPlanner warm_ups_ ABSL_GUARDED_BY(mu_);
  routing::WorkerSlots slots_ ABSL_GUARDED_BY(mu_);
  std::array<SlotInfo, routing::kMaxWorkers> info_ ABSL_GUARDED_BY(mu_){};
  std::vector<Ticket> tickets_ ABSL_GUARDED_BY(mu_);
  std::vector<int> free_tickets_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int, std::shared_ptr<async::Event>> hold_waiters_ ABSL_GUARDED_BY(mu_);
  // Warm-up request ids: unique per worker across routers and restarts.
  const std::string warm_up_id_prefix_;
  std::atomic<std::uint64_t> warm_ups_sent_{0};
};

}  // namespace tandem::router
