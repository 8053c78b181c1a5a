#include "workers/prefix_router.h"

#include <algorithm>
#include <bit>
#include <iostream>

#include "absl/container/inlined_vector.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "dispatch/worker_calls.h"
#include "tandem/base/hash.h"
#include "tandem/routing/held_moves.h"
#include "tandem/routing/prefill_pieces.h"
#include "tandem/rpc/conversions.h"

namespace tandem::router {
namespace {

using routing::BlockHash;
using routing::kNoWorker;
using routing::WorkerMask;
using routing::WorkerSlot;

// Prompts up to this many blocks (4,096 tokens at 16 per block) are hashed without allocating.
constexpr std::size_t kInlineChainBlocks = 256;

routing::Role RoleOf(v1::WorkerRole role) {
  switch (role) {
    case v1::WORKER_ROLE_PREFILL: return routing::Role::kPrefill;
    case v1::WORKER_ROLE_DECODE: return routing::Role::kDecode;
    default: return routing::Role::kCombined;
  }
}

absl::StatusOr<routing::Tier> TierOf(v1::KvTier tier) {
  switch (tier) {
    case v1::KV_TIER_DEVICE: return routing::Tier::kDevice;
    case v1::KV_TIER_HOST: return routing::Tier::kHost;
    case v1::KV_TIER_DISK: return routing::Tier::kDisk;
    default:
      return absl::InvalidArgumentError(absl::StrCat("KV event with tier ", static_cast<int>(tier)));
  }
}

absl::StatusOr<routing::KvEvent> FromProto(const v1::KvEvent& in) {
  routing::KvEvent out;
  out.seq = in.seq();
  switch (in.kind_case()) {
    case v1::KvEvent::kStored: {
      out.kind = routing::KvEvent::Kind::kStored;
      auto tier = TierOf(in.stored().tier());
      if (!tier.ok()) return tier.status();
      out.tier = *tier;
      out.parent_hash = in.stored().parent_hash();
      out.block_hashes.assign(in.stored().block_hashes().begin(), in.stored().block_hashes().end());
      return out;
    }
    case v1::KvEvent::kRemoved: {
      out.kind = routing::KvEvent::Kind::kRemoved;
      auto tier = TierOf(in.removed().tier());
      if (!tier.ok()) return tier.status();
      out.tier = *tier;
      out.block_hashes.assign(in.removed().block_hashes().begin(),
                              in.removed().block_hashes().end());
      return out;
    }
    case v1::KvEvent::kSnapshot: {
      out.kind = routing::KvEvent::Kind::kSnapshot;
      for (const auto& tier_blocks : in.snapshot().tiers()) {
        auto tier = TierOf(tier_blocks.tier());
        if (!tier.ok()) return tier.status();
        out.snapshot.push_back(
            {*tier, {tier_blocks.block_hashes().begin(), tier_blocks.block_hashes().end()}});
      }
      return out;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat("KV event ", in.seq(), " has no kind"));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<PrefixRouter>> PrefixRouter::Create(Options options) {
  if (options.block_size < 1) return absl::InvalidArgumentError("KV block size must be >= 1");
  if (options.max_index_blocks < 1) {
    return absl::InvalidArgumentError("the prefix index needs room for at least one block");
  }
  auto policy = routing::MakePolicy(options.policy);
  if (!policy.ok()) return policy.status();
  return std::unique_ptr<PrefixRouter>(new PrefixRouter(std::move(options), std::move(*policy)));
}

PrefixRouter::PrefixRouter(Options options, std::unique_ptr<routing::Policy> policy)
    : options_(std::move(options)),
      policy_(std::move(policy)),
      epoch_(options_.now()),
      index_(routing::KvIndex::Options{.max_blocks = options_.max_index_blocks}),
      hold_(routing::PrefillQueue::Options{
          .depth = routing::PolicyHoldsPrefills(policy_->name()) ? options_.prefill_hold_depth : 0,
          .aging = options_.prefill_hold_aging}),
      warm_ups_(routing::WarmUpOptions{.enabled = options_.warm_ups &&
                                                  routing::PolicyWarmsUp(policy_->name())}),
      warm_up_id_prefix_(
          absl::StrCat("warm-up-", absl::Hex(absl::Uniform<std::uint64_t>(absl::BitGen())), "-")) {
  absl::MutexLock lock(&link_->mu);
  link_->router = this;
}

PrefixRouter::~PrefixRouter() {
  absl::MutexLock lock(&link_->mu);
  link_->router = nullptr;
}

double PrefixRouter::Seconds() const {
  return std::chrono::duration<double>(options_.now() - epoch_).count();
}

absl::StatusOr<WorkerSlot> PrefixRouter::SlotFor(const std::string& worker_id,
                                                 std::uint64_t incarnation) {
  absl::StatusOr<WorkerSlot> slot = slots_.Assign(worker_id);
  if (!slot.ok()) {
    // Workers named per process start leave ids behind; reuse the slot heard from least recently
    // by one that is not registered (a departed incarnation), else give up on this one.
    WorkerSlot oldest = kNoWorker;
    for (WorkerSlot w = 0; w < routing::kMaxWorkers; ++w) {
      const routing::WorkerState* s = table_.Find(w);
      if (s != nullptr && s->available) continue;
      if (oldest == kNoWorker || info_[w].last_heard < info_[oldest].last_heard) oldest = w;
    }
    if (oldest == kNoWorker || slots_.IdOf(oldest) == nullptr) return slot.status();
    slots_.Release(*slots_.IdOf(oldest));
    (void)index_.RemoveWorker(oldest);
    info_[oldest] = SlotInfo{.generation = info_[oldest].generation + 1};
    slot = slots_.Assign(worker_id);
    if (!slot.ok()) return slot.status();
  }
  SlotInfo& info = info_[*slot];
  info.last_heard = Seconds();
  if (info.incarnation != incarnation || !info.known) {
    // The latest incarnation wins: an older process is gone once a newer one speaks.
    if (absl::Status st = index_.AddWorker(*slot, incarnation); !st.ok()) return st;
    info = SlotInfo{.incarnation = incarnation,
                    .known = true,
                    .generation = info.generation + 1,
                    .last_heard = info.last_heard};
  }
  return *slot;
}

absl::Status PrefixRouter::OnRegistered(const v1::WorkerInfo& worker) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<WorkerSlot> slot = SlotFor(worker.worker_id(), worker.incarnation());
  if (!slot.ok()) return slot.status();
  SlotInfo& info = info_[*slot];
  if (info.registered) return absl::OkStatus();  // the same process again: keep its accounting
  info.registered = true;
  hold_.SetBatchTokens(*slot, options_.prefill_batch_tokens >= 0
                                  ? options_.prefill_batch_tokens
                                  : static_cast<std::int64_t>(worker.max_batch_tokens()));
  return table_.Add(*slot, RoleOf(worker.role()));
}

bool PrefixRouter::OnHeartbeat(const v1::HeartbeatRequest& heartbeat) {
  absl::MutexLock lock(&mu_);
  const WorkerSlot slot = slots_.Find(heartbeat.worker_id());
  if (slot == kNoWorker) return false;
  SlotInfo& info = info_[slot];
  if (!info.known || info.incarnation != heartbeat.incarnation()) return false;
  info.last_heard = Seconds();
  const v1::WorkerLoad& load = heartbeat.load();
  (void)table_.Report(slot, static_cast<int>(load.running_requests()),
                      static_cast<int>(load.waiting_requests()), load.total_kv_blocks(),
                      std::min(load.free_kv_blocks(), load.total_kv_blocks()));
  // The previous heartbeat's seq was sent a whole period ago: events up to it should be here. If
  // not, the worker's stream is stuck or lost events; its index entries can no longer be trusted.
  if (info.claimed_seq > index_.last_seq(slot) &&
      index_.ObserveSeq(slot, info.claimed_seq).value_or(routing::EventOutcome::kApplied) ==
          routing::EventOutcome::kGap) {
    std::cerr << "router: worker " << heartbeat.worker_id() << " reported KV event "
              << info.claimed_seq << " but only " << index_.last_seq(slot)
              << " arrived; out of routing until it resends a snapshot\n";
  }
  info.claimed_seq = heartbeat.last_kv_event_seq();
  return index_.IsStale(slot);
}

v1::KvEventAck PrefixRouter::OnEvents(const v1::KvEventBatch& batch) {
  v1::KvEventAck ack;
  absl::MutexLock lock(&mu_);
  absl::StatusOr<WorkerSlot> slot = SlotFor(batch.worker_id(), batch.incarnation());
  if (!slot.ok()) {
    std::cerr << "router: KV events of " << batch.worker_id() << " dropped: "
              << slot.status().message() << "\n";
    return ack;
  }
  for (const v1::KvEvent& wire : batch.events()) {
    absl::StatusOr<routing::KvEvent> event = FromProto(wire);
    if (!event.ok()) {
      // An event we cannot apply is as good as lost: re-sync from a snapshot.
      std::cerr << "router: worker " << batch.worker_id() << ": " << event.status().message()
                << "; asking for a snapshot\n";
      (void)index_.ObserveSeq(*slot, std::max(wire.seq(), index_.last_seq(*slot) + 1));
      continue;
    }
    const auto outcome = index_.Apply(*slot, *event);
    if (event->kind == routing::KvEvent::Kind::kSnapshot && outcome.ok() &&
        *outcome == routing::EventOutcome::kApplied) {
      // Rare (stream start, after a gap) and what an operator checks after a router restart.
      std::int64_t blocks = 0;
      for (const auto& tier : event->snapshot) blocks += static_cast<std::int64_t>(tier.block_hashes.size());
      std::cerr << "router: worker " << batch.worker_id() << " KV snapshot at seq " << event->seq
                << ": " << blocks << " blocks\n";
    }
  }
  ack.set_acked_seq(index_.last_seq(*slot));
  ack.set_resend_snapshot(index_.IsStale(*slot));
  return ack;
}

WorkerSlot PrefixRouter::SlotOfLocked(const std::string& worker_id, std::uint64_t incarnation) {
  const WorkerSlot slot = slots_.Find(worker_id);
  if (slot == kNoWorker || !info_[slot].known || info_[slot].incarnation != incarnation) {
    return kNoWorker;
  }
  return slot;
}

void PrefixRouter::OnDraining(const std::string& worker_id, std::uint64_t incarnation) {
  absl::MutexLock lock(&mu_);
  const WorkerSlot slot = SlotOfLocked(worker_id, incarnation);
  if (slot == kNoWorker) return;
  const routing::WorkerState* state = table_.Find(slot);
  if (state != nullptr && state->available) (void)table_.SetAvailable(slot, false);
  if (hold_.held(slot) > 0) {
    WakeLocked(hold_.ReleaseAll(slot));
    PublishHeld();
  }
}

void PrefixRouter::OnDeregistered(const std::string& worker_id, std::uint64_t incarnation) {
  absl::MutexLock lock(&mu_);
  const WorkerSlot slot = SlotOfLocked(worker_id, incarnation);
  if (slot == kNoWorker) return;
  if (table_.Find(slot) != nullptr) (void)table_.SetAvailable(slot, false);
  if (hold_.held(slot) > 0) {
    WakeLocked(hold_.ReleaseAll(slot));
    PublishHeld();
  }
  // As when a slot is reused: a new generation, so late completions of its tickets are ignored.
  slots_.Release(worker_id);
  (void)index_.RemoveWorker(slot);
  info_[slot] = SlotInfo{.generation = info_[slot].generation + 1};
}

void PrefixRouter::SetAvailabilityLocked(WorkerMask available) {
  for (const routing::WorkerState& state : table_.states()) {
    if (state.slot == kNoWorker) continue;
    const bool on = (available & routing::SlotBit(state.slot)) != 0;
    if (state.available != on) (void)table_.SetAvailable(state.slot, on);
  }
}

std::vector<BlockHash> PrefixRouter::BlockHashes(std::span<const std::int32_t> prompt,
                                                 std::uint64_t kv_hash_root) const {
  return ChainedBlockHashes(prompt, static_cast<std::size_t>(options_.block_size), kv_hash_root);
}

int PrefixRouter::NewTicket(const Ticket& ticket) {
  int id;
  if (!free_tickets_.empty()) {
    id = free_tickets_.back();
    free_tickets_.pop_back();
  } else {
    id = static_cast<int>(tickets_.size());
    tickets_.emplace_back();
  }
  tickets_[id] = ticket;
  tickets_[id].used = true;
  return id;
}

bool PrefixRouter::TicketLive(int ticket) const {
  if (ticket < 0 || ticket >= static_cast<int>(tickets_.size()) || !tickets_[ticket].used) {
    return false;
  }
  const Ticket& t = tickets_[ticket];
  return info_[t.slot].generation == t.generation;
}

absl::StatusOr<PrefixRouter::Choice> PrefixRouter::Choose(std::span<const std::int32_t> prompt,
                                                          const Candidates& candidates,
                                                          std::int64_t max_output_tokens,
                                                          std::uint64_t kv_hash_root) {
  // Hashing outside the lock, into a stack buffer for prompts of usual length: no allocation.
  const auto block_size = static_cast<std::size_t>(options_.block_size);
  absl::InlinedVector<BlockHash, kInlineChainBlocks> chain(prompt.size() / block_size);
  ChainedBlockHashesInto(prompt, block_size, kv_hash_root, std::span(chain.data(), chain.size()));
  absl::MutexLock lock(&mu_);
  // Views, not shared_ptr copies: only the chosen workers' entries are copied (refcounts are
  // atomic), and the candidates outlive this call.
  std::array<const WorkerView*, routing::kMaxWorkers> views{};
  WorkerMask routable = 0;
  WorkerMask decode_pool = 0;
  for (const auto* pool : {&candidates.prefill, &candidates.decode}) {
    // Workers whose KV events stopped or broke are left out while the pool has others: what they
    // hold is unknown. A pool of only such workers (e.g. just after a router restart, before the
    // snapshots are in) still serves, without affinity, rather than failing every request.
    for (bool allow_stale : {false, true}) {
      bool any = false;
      for (const WorkerView& view : *pool) {
        const WorkerSlot slot = slots_.Find(view.entry->id());
        if (slot == kNoWorker) continue;
        const SlotInfo& info = info_[slot];
        if (!info.registered || info.incarnation != view.entry->info().incarnation()) continue;
        if (index_.IsStale(slot) && !allow_stale) continue;
        routable |= routing::SlotBit(slot);
        if (pool == &candidates.decode) decode_pool |= routing::SlotBit(slot);
        views[slot] = &view;
        any = true;
      }
      if (any) break;
    }
  }
  const auto info_of = [&](WorkerSlot slot) -> const v1::WorkerInfo& {
    return views[slot]->entry->info();
  };
  const auto each_slot = [](WorkerMask mask, auto&& fn) {
    for (; mask != 0; mask &= mask - 1) fn(static_cast<WorkerSlot>(std::countr_zero(mask)));
  };
  // A prefill without a decode of its KV layout, or a decode without such a prefill, cannot be
  // part of any pair. Usually every worker has the same layout and this is one pass.
  WorkerMask pairable = routable;
  if (decode_pool != 0) {
    bool mixed = false;
    const std::string* layout = nullptr;
    each_slot(routable, [&](WorkerSlot w) {
      if (layout == nullptr) layout = &info_of(w).kv_layout_id();
      mixed = mixed || *layout != info_of(w).kv_layout_id();
    });
    if (mixed) {
      const WorkerMask prefill_pool = routable & ~decode_pool;
      pairable = 0;
      each_slot(prefill_pool, [&](WorkerSlot p) {
        each_slot(decode_pool, [&](WorkerSlot d) {
          if (KvCompatible(info_of(p), info_of(d))) {
            pairable |= routing::SlotBit(p) | routing::SlotBit(d);
          }
        });
      });
      if (pairable == 0) {
        return absl::UnavailableError(
            "no prefill and decode worker share a kv_layout_id (KV format): no pair can be formed");
      }
    }
  }
  // Only workers whose availability changed since the previous decision are written: usually
  // none.
  SetAvailabilityLocked(pairable);
  for (const routing::WorkerState& state : table_.states()) {
    if (state.slot == kNoWorker) continue;
    const bool candidate = (routable & routing::SlotBit(state.slot)) != 0;
    // Held prefills of a worker out of routing would wait for completions that never come: they
    // go now and fail (or finish) on their own.
    if (!candidate && hold_.held(state.slot) > 0) {
      WakeLocked(hold_.ReleaseAll(state.slot));
      PublishHeld();
    }
  }
  routing::RouteRequest request{.block_hashes = chain,
                                .prompt_tokens = static_cast<std::int64_t>(prompt.size()),
                                .block_size = options_.block_size,
                                .max_output_tokens = max_output_tokens};
  const double now = Seconds();
  absl::StatusOr<routing::RouteDecision> decision =
      policy_->Route(request, routing::ClusterView{.index = &index_,
                                                   .workers = table_.states(),
                                                   .now_seconds = now});
  if (!decision.ok()) {
    return absl::UnavailableError(
        absl::StrCat("no routable workers: ", decision.status().message()));
  }
  // The policies choose the decode apart from the prefill. When the decode is of another KV
  // layout than the prefill, or of another generation while one of the prefill's generation is
  // there, the decode is chosen again among the preferred ones, for that prefill.
  const WorkerSlot p = decision->prefill;
  const WorkerSlot d = decision->decode;
  if (d != kNoWorker && p >= 0 && p < routing::kMaxWorkers && d >= 0 &&
      d < routing::kMaxWorkers && views[p] != nullptr && views[d] != nullptr &&
      !SameGeneration(info_of(p), info_of(d))) {
    WorkerMask same_generation = 0, compatible = 0;
    each_slot(pairable & decode_pool, [&](WorkerSlot w) {
      if (SameGeneration(info_of(p), info_of(w))) same_generation |= routing::SlotBit(w);
      if (KvCompatible(info_of(p), info_of(w))) compatible |= routing::SlotBit(w);
    });
    const WorkerMask preferred = same_generation != 0 ? same_generation : compatible;
    if ((preferred & routing::SlotBit(d)) == 0) {
      SetAvailabilityLocked(routing::SlotBit(p) | preferred);
      decision = policy_->Route(request, routing::ClusterView{.index = &index_,
                                                              .workers = table_.states(),
                                                              .now_seconds = now});
      SetAvailabilityLocked(pairable);
      if (!decision.ok()) {
        return absl::UnavailableError(
            absl::StrCat("no routable workers: ", decision.status().message()));
      }
      if (decision->prefill != p || decision->decode == kNoWorker || decision->decode < 0 ||
          decision->decode >= routing::kMaxWorkers ||
          (preferred & routing::SlotBit(decision->decode)) == 0) {
        return absl::InternalError(absl::StrCat("policy ", policy_->name(),
                                                " paired a prefill with an incompatible decode"));
      }
    }
  }
  const auto chosen = [&](WorkerSlot slot) -> const WorkerView* {
    return slot >= 0 && slot < routing::kMaxWorkers ? views[slot] : nullptr;
  };
  const WorkerView* prefill = chosen(decision->prefill);
  const WorkerView* decode = chosen(decision->decode);
  if (prefill == nullptr || (decision->decode != kNoWorker && decode == nullptr)) {
    return absl::InternalError(absl::StrCat("policy ", policy_->name(),
                                            " chose a worker that is not a candidate"));
  }
  index_.Touch(chain);
  info_[decision->prefill].entry = prefill->entry;
  if (decode != nullptr) info_[decision->decode].entry = decode->entry;

  Choice choice;
  choice.prefill = prefill->entry;
  choice.predicted_cached_tokens = decision->predicted_cached_tokens;
  const std::int64_t prompt_tokens = request.prompt_tokens;
  const std::int64_t bs = options_.block_size;
  const std::int64_t blocks = (prompt_tokens + std::max<std::int64_t>(max_output_tokens, 0) + bs - 1) / bs;
  const std::int64_t uncached = std::max<std::int64_t>(0, prompt_tokens - choice.predicted_cached_tokens);
  // Planned on the table as it was before this prefill: whether it waits is whether its worker
  // had work. Only between prefill-only workers (held the same way), never for a combined pool.
  std::optional<routing::WarmUp> warm_up;
  if (decision->decode != kNoWorker) {
    warm_up = warm_ups_.Plan(
        chain, decision->prefill,
        routing::ClusterView{.index = &index_, .workers = table_.states(), .now_seconds = now},
        now);
  }
  table_.OnPrefillDispatched(decision->prefill, uncached, blocks, now);
  choice.prefill_ticket = NewTicket({.slot = decision->prefill,
                                     .generation = info_[decision->prefill].generation,
                                     .uncached_tokens = uncached,
                                     .prompt_tokens = prompt_tokens,
                                     .blocks = blocks,
                                     .dispatched = now});
  // Only prefill-only workers are held: a combined worker's prefill accounting lasts its whole
  // generation, so holding would serialise generations.
  if (decision->decode != kNoWorker) {
    // Before a worker's speed is learnt the policies' prior orders the queue: only relative sizes
    // matter then.
    const double seconds_per_token = table_.states()[decision->prefill].PrefillSecondsPerToken(
        routing::TandemOptions{}.prior_prefill_seconds_per_token);
    choice.held = !hold_.Enqueue(static_cast<routing::PrefillQueue::Ticket>(choice.prefill_ticket),
                                 decision->prefill,
                                 static_cast<double>(uncached) * seconds_per_token, now,
                                 uncached);
    choice.may_cut = CutsPrefills();
    if (choice.held || choice.may_cut) {
      // What a move (a held prefill's) and a piece (rule 11) look up in the index.
      Ticket& held = tickets_[choice.prefill_ticket];
      held.chain.assign(chain.begin(), chain.end());
      held.decode_slot = decision->decode;
    }
    if (choice.held) PublishHeld();
    choice.decode = decode->entry;
    table_.OnDecodeDispatched(decision->decode, blocks);
    choice.decode_ticket = NewTicket({.slot = decision->decode,
                                      .generation = info_[decision->decode].generation,
                                      .blocks = blocks});
  }
  if (warm_up.has_value()) {
    const WorkerView* target = chosen(warm_up->worker);
    if (target == nullptr) {
      warm_ups_.Done(warm_up->run_end, now);
    } else {
      // Straight to its idle worker, outside the hold queue: no request waits on it.
      const std::int64_t tokens = static_cast<std::int64_t>(warm_up->blocks) * bs;
      const std::int64_t to_compute =
          static_cast<std::int64_t>(warm_up->blocks - warm_up->cached_blocks) * bs;
      table_.OnPrefillDispatched(warm_up->worker, to_compute, warm_up->blocks, now);
      choice.warm_up = target->entry;
      choice.warm_up_tokens = tokens;
      choice.warm_up_ticket = NewTicket({.slot = warm_up->worker,
                                         .generation = info_[warm_up->worker].generation,
                                         .uncached_tokens = to_compute,
                                         .prompt_tokens = tokens,
                                         .blocks = warm_up->blocks,
                                         .dispatched = now,
                                         .warm_up = true,
                                         .warm_up_run_end = warm_up->run_end});
      if (options_.metrics != nullptr) options_.metrics->prefill_warm_ups->Increment();
    }
  }
  return choice;
}

v1::PrefillRequest PrefixRouter::WarmUpRequest(std::span<const std::int32_t> prefix,
                                               std::uint64_t kv_hash_root, absl::string_view kind) {
  v1::PrefillRequest request;
  *request.mutable_version() = rpc::CurrentVersion();
  request.set_request_id(absl::StrCat(warm_up_id_prefix_, kind, ++warm_ups_sent_));
  request.mutable_prompt_token_ids()->Add(prefix.begin(), prefix.end());
  request.mutable_sampling()->set_kv_hash_root(kv_hash_root);
  request.set_warm_up(true);
  return request;
}

void PrefixRouter::SendWarmUp(const Choice& choice, std::span<const std::int32_t> prompt,
                              std::uint64_t kv_hash_root) {
  if (choice.warm_up == nullptr) return;
  // Long enough for a long prompt on a busy CPU worker; a warm-up nobody waits for has no
  // deadline of its own, and an abandoned one only delays the next copy of its run.
  constexpr auto kWarmUpDeadline = std::chrono::seconds(120);
  struct Call {
    grpc::ClientContext ctx;
    v1::PrefillRequest request;
    v1::PrefillResponse response;
    std::shared_ptr<WorkerEntry> worker;  // keeps the stub's channel for the call
    std::shared_ptr<Link> link;
    int ticket = -1;
  };
  auto call = std::make_shared<Call>();
  call->ctx.set_deadline(std::chrono::system_clock::now() + kWarmUpDeadline);
  const std::size_t tokens = std::min(
      prompt.size(), static_cast<std::size_t>(std::max<std::int64_t>(0, choice.warm_up_tokens)));
  call->request = WarmUpRequest(prompt.first(tokens), kv_hash_root, "");
  call->worker = choice.warm_up;
  call->link = link_;
  call->ticket = choice.warm_up_ticket;
  Call* raw = call.get();
  raw->worker->stub().async()->Prefill(
      &raw->ctx, &raw->request, &raw->response, [call = std::move(call)](grpc::Status status) {
        absl::MutexLock lock(&call->link->mu);
        PrefixRouter* router = call->link->router;
        if (router == nullptr) return;
        if (!status.ok() && router->options_.metrics != nullptr) {
          router->options_.metrics->prefill_warm_ups_failed->Increment();
        }
        router->PrefillFinished(call->ticket, status.ok() ? &call->response : nullptr);
      });
}

int PrefixRouter::WarmUpsInFlight() {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const Ticket& t : tickets_) n += t.used && t.warm_up;
  return n;
}

bool PrefixRouter::PrefillHeld(int ticket) {
  absl::MutexLock lock(&mu_);
  return hold_.IsHeld(static_cast<routing::PrefillQueue::Ticket>(ticket));
}

async::Task<absl::StatusOr<std::optional<WorkerLease::Moved>>> PrefixRouter::PrefillTurn(
    int ticket, async::Executor* executor, CallCanceller* canceller,
    std::chrono::system_clock::time_point deadline) {
  const auto key = static_cast<routing::PrefillQueue::Ticket>(ticket);
  std::shared_ptr<async::Event> wake = async::Event::Create(executor);
  CallCanceller::Wake on_cancel(canceller, wake);
  async::Alarm at_deadline(wake, deadline);
  bool waited = false;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (!hold_.IsHeld(key)) {
        hold_waiters_.erase(ticket);
        std::optional<WorkerLease::Moved> moved;
        if (ticket >= 0 && ticket < static_cast<int>(tickets_.size())) {
          Ticket& t = tickets_[ticket];
          if (waited && !t.hold_observed && options_.metrics != nullptr) {
            options_.metrics->prefill_hold_seconds->Observe(Seconds() - t.dispatched);
            t.hold_observed = true;
          }
          if (t.moved_to != nullptr) {
            moved = WorkerLease::Moved{.to = std::move(t.moved_to),
                                       .predicted_cached_tokens = t.moved_cached_tokens};
          }
          if (!CutsPrefills()) t.chain = {};  // only a held prefill can move
        }
        co_return moved;
      }
      absl::Status gave_up = canceller->reason();
      if (gave_up.ok() && std::chrono::system_clock::now() >= deadline) {
        gave_up = absl::DeadlineExceededError("deadline passed while waiting for a prefill worker");
      }
      if (!gave_up.ok()) {
        hold_waiters_.erase(ticket);
        WakeLocked(hold_.Done(key));
        PublishHeld();
        co_return gave_up;
      }
      hold_waiters_[ticket] = wake;
    }
    waited = true;
    co_await wake->Wait();
  }
}

void PrefixRouter::WakeLocked(const std::vector<routing::PrefillQueue::Ticket>& released) {
  for (routing::PrefillQueue::Ticket ticket : released) {
    auto waiter = hold_waiters_.find(static_cast<int>(ticket));
    if (waiter != hold_waiters_.end()) waiter->second->Notify();
  }
}

void PrefixRouter::PublishHeld() {
  if (options_.metrics != nullptr) {
    options_.metrics->prefills_held->Set(static_cast<double>(hold_.total_held()));
  }
}

void PrefixRouter::PrefillFinished(int ticket, const v1::PrefillResponse* response) {
  absl::MutexLock lock(&mu_);
  // Its place (or its spot in the queue) is free whatever happened to it.
  WakeLocked(hold_.Done(static_cast<routing::PrefillQueue::Ticket>(ticket)));
  PublishHeld();
  if (ticket < 0 || ticket >= static_cast<int>(tickets_.size()) || !tickets_[ticket].used) return;
  const Ticket t = std::move(tickets_[ticket]);
  tickets_[ticket] = Ticket{};
  free_tickets_.push_back(ticket);
  const double now = Seconds();
  if (t.warm_up) warm_ups_.Done(t.warm_up_run_end, now);
  if (info_[t.slot].generation != t.generation) return;  // a previous incarnation's request
  std::int64_t computed = 0;
  double compute_seconds = 0;
  if (response != nullptr) {
    computed = std::max<std::int64_t>(0, t.prompt_tokens - response->cached_prompt_tokens());
    // One prefill at a time per worker: this one started when it arrived or when the previous one
    // ended, whichever is later. The KV transfer is not prefill speed.
    const double started = std::max({t.dispatched, t.moved_at, info_[t.slot].last_prefill_end});
    compute_seconds = now - started - response->kv_transfer_us() / 1e6;
    info_[t.slot].last_prefill_end = now;
  }
  table_.OnPrefillFinished(t.slot, t.uncached_tokens, t.blocks, computed,
                           std::max(0.0, compute_seconds), now);
  if (table_.states()[t.slot].in_flight == 0 && hold_.out(t.slot) == 0 && hold_.held(t.slot) == 0) {
    MoveHeldToLocked(t.slot, now);
  }
}

void PrefixRouter::MoveHeldToLocked(WorkerSlot idle, double now) {
  if (!options_.held_moves || !routing::PolicyMovesHeld(policy_->name()) ||
      hold_.total_held() == 0) {
    return;
  }
  const routing::WorkerState& state = table_.states()[idle];
  std::shared_ptr<WorkerEntry> entry = info_[idle].entry.lock();
  // Only onto a routable prefill-only worker of the current incarnation (what the hold queue
  // holds for), whose index is current.
  if (entry == nullptr || state.role != routing::Role::kPrefill || !state.available ||
      !info_[idle].registered || entry->info().incarnation() != info_[idle].incarnation ||
      index_.IsStale(idle)) {
    return;
  }
  // The tandem policy's own cost terms (the router runs it with its defaults).
  const routing::HeldMoveOptions options;
  const std::optional<routing::HeldMove> move = routing::PickHeldMove(
      hold_, idle, table_.states(), now, options,
      [&](routing::PrefillQueue::Ticket key) -> std::int64_t {
        const int id = static_cast<int>(key);
        if (id < 0 || id >= static_cast<int>(tickets_.size())) return -1;
        const Ticket& t = tickets_[id];
        if (!t.used || t.decode_slot == kNoWorker) return -1;
        std::shared_ptr<WorkerEntry> decode = info_[t.decode_slot].entry.lock();
        if (decode == nullptr || !KvCompatible(entry->info(), decode->info())) return -1;
        return routing::UncachedTokensOn(index_, t.chain, t.prompt_tokens, options_.block_size,
                                         idle);
      });
  if (!move.has_value()) return;
  Ticket& t = tickets_[static_cast<int>(move->ticket)];
  const bool started =
      routing::ApplyHeldMove(*move, idle, t.uncached_tokens, t.blocks, now,
                             options.prior_prefill_seconds_per_token, &table_, &hold_);
  t.slot = idle;
  t.generation = info_[idle].generation;
  t.uncached_tokens = move->uncached_tokens;
  t.moved_to = std::move(entry);
  t.moved_at = now;
  t.moved_cached_tokens = t.prompt_tokens - move->uncached_tokens;
  t.piece_end = 0;  // its pieces so far are cached on the worker it left
  if (started) WakeLocked({move->ticket});
  PublishHeld();
  if (options_.metrics != nullptr) options_.metrics->prefill_held_moves->Increment();
}

bool PrefixRouter::CutsPrefills() const {
  return routing::CutsPrefills(options_.prefill_pieces, policy_->name(), hold_.options().depth);
}

std::optional<std::int64_t> PrefixRouter::NextPieceLocked(int ticket,
                                                          std::span<const std::int32_t> prompt) {
  if (!CutsPrefills() || !TicketLive(ticket)) return std::nullopt;
  Ticket& t = tickets_[ticket];
  if (t.chain.empty() || static_cast<std::int64_t>(prompt.size()) != t.prompt_tokens) {
    return std::nullopt;
  }
  const std::int64_t bs = options_.block_size;
  // What the worker holds of the prompt: per the index, or the pieces it computed (their KV
  // events may not have arrived yet).
  const std::int64_t indexed =
      t.prompt_tokens - routing::UncachedTokensOn(index_, t.chain, t.prompt_tokens, bs, t.slot);
  // A piece carries token ids only: it ends before the first image position.
  std::int64_t cut_limit = -1;
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0) {
      cut_limit = static_cast<std::int64_t>(i);
      break;
    }
  }
  const std::optional<routing::PrefillPiece> piece = routing::NextPiece(
      options_.prefill_pieces, t.prompt_tokens, indexed, t.piece_end, static_cast<int>(bs),
      table_.states()[t.slot].PrefillSecondsPerToken(
          options_.prefill_pieces.prior_prefill_seconds_per_token),
      hold_.held(t.slot) > 0, cut_limit);
  if (!piece.has_value()) return std::nullopt;
  t.piece_uncached = std::min(t.uncached_tokens, piece->end_tokens - piece->start_tokens);
  t.piece_end = piece->end_tokens;
  t.piece_started = Seconds();
  return piece->end_tokens;
}

async::Task<absl::StatusOr<std::optional<std::int64_t>>> PrefixRouter::RunPrefillPiece(
    int ticket, std::span<const std::int32_t> prompt, std::uint64_t kv_hash_root,
    std::shared_ptr<WorkerEntry> worker, async::Executor* executor, CallCanceller* canceller,
    std::chrono::system_clock::time_point deadline) {
  std::optional<std::int64_t> end;
  {
    absl::MutexLock lock(&mu_);
    end = NextPieceLocked(ticket, prompt);
  }
  if (!end.has_value() || worker == nullptr) co_return std::nullopt;
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline);
  CallCanceller::Scope scope(canceller, &ctx);
  const v1::PrefillRequest call =
      WarmUpRequest(prompt.first(static_cast<std::size_t>(*end)), kv_hash_root, "piece-");
  v1::PrefillResponse response;
  const grpc::Status status = co_await CallUnary(executor, [&](auto done) {
    worker->stub().async()->Prefill(&ctx, &call, &response, std::move(done));
  });
  if (status.ok()) co_return PieceDone(ticket, *end, response);
  // Without an answer the prefill stays out: the whole rest goes next, accounted as dispatched.
  if (canceller->cancelled()) co_return canceller->reason();
  co_return std::nullopt;
}

std::int64_t PrefixRouter::PieceDone(int ticket, std::int64_t piece_end,
                                     const v1::PrefillResponse& response) {
  const std::int64_t computed =
      std::max<std::int64_t>(0, piece_end - response.cached_prompt_tokens());
  absl::MutexLock lock(&mu_);
  if (!TicketLive(ticket)) return computed;
  Ticket& t = tickets_[ticket];
  const double now = Seconds();
  const double started = std::max(t.piece_started, info_[t.slot].last_prefill_end);
  info_[t.slot].last_prefill_end = now;
  const std::int64_t rest = std::max<std::int64_t>(0, t.uncached_tokens - t.piece_uncached);
  WakeLocked(routing::ApplyPieceDone(static_cast<routing::PrefillQueue::Ticket>(ticket), t.slot,
                                     t.piece_uncached, computed, std::max(0.0, now - started), rest,
                                     now, options_.prefill_pieces.prior_prefill_seconds_per_token,
                                     &table_, &hold_));
  t.uncached_tokens = rest;
  t.piece_uncached = 0;
  PublishHeld();
  if (options_.metrics != nullptr) options_.metrics->prefill_pieces->Increment();
  return computed;
}

void PrefixRouter::DecodeFinished(int ticket) {
  absl::MutexLock lock(&mu_);
  if (!TicketLive(ticket)) {
    if (ticket >= 0 && ticket < static_cast<int>(tickets_.size()) && tickets_[ticket].used) {
      tickets_[ticket].used = false;
      free_tickets_.push_back(ticket);
    }
    return;
  }
  const Ticket t = tickets_[ticket];
  tickets_[ticket].used = false;
  free_tickets_.push_back(ticket);
  table_.OnDecodeFinished(t.slot, t.blocks);
}

bool PrefixRouter::Routable(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  const WorkerSlot slot = slots_.Find(worker_id);
  return slot != kNoWorker && info_[slot].registered && !index_.IsStale(slot);
}

std::int64_t PrefixRouter::IndexedBlocks(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  const WorkerSlot slot = slots_.Find(worker_id);
  if (slot == kNoWorker) return 0;
  std::int64_t total = 0;
  for (int t = 0; t < routing::kNumTiers; ++t) {
    total += index_.blocks_on(slot, static_cast<routing::Tier>(t));
  }
  return total;
}

}  // namespace tandem::router
