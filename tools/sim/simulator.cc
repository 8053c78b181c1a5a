#include "simulator.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <queue>
#include <span>

#include "absl/strings/str_cat.h"
#include "block_lru.h"
#include "bounds.h"
#include "stats.h"
#include "tandem/routing/held_moves.h"
#include "tandem/routing/kv_index.h"
#include "tandem/routing/prefill_queue.h"
#include "tandem/routing/warm_up.h"
#include "tandem/routing/worker_state.h"

namespace tandem::sim {
namespace {

using routing::BlockHash;
using routing::KvEvent;
using routing::WorkerSlot;

struct RequestState {
  const TraceRequest* trace = nullptr;
  double arrival = 0;
  WorkerSlot prefill = routing::kNoWorker;
  WorkerSlot decode = routing::kNoWorker;
  std::int64_t predicted_uncached = 0;
  std::int64_t blocks = 0;        // prompt blocks
  std::int64_t decode_blocks = 0; // prompt + output blocks reserved on the decode worker
  std::int64_t tokens_left = 0;   // decode tokens still to generate
  double last_token = 0;
  std::vector<BlockHash> to_store;  // blocks this prefill adds to its worker's cache
  BlockHash parent = 0;
  double compute_seconds = 0;
  std::int64_t computed_tokens = 0;
  double started = -1;              // when its prefill first started on a worker
  std::int64_t total_computed = 0;  // over its pieces
  bool piece = false;               // what runs now is a piece, not the rest of the prompt
  // Where its last piece on its current worker ended: the next one starts there even if the
  // worker has evicted part of it since (as PrefixRouter does), so pieces always advance.
  std::int64_t piece_end = 0;
  std::int64_t chosen_cached_blocks = 0;  // RequestRecord's, at arrival
  std::int64_t best_cached_blocks = 0;
};

// A warm-up (routing::WarmUpPlanner) as its worker runs it: a prefix computed alone.
struct WarmUpJob {
  std::span<const BlockHash> chain;  // the run to compute
  std::int64_t predicted_uncached = 0;
  std::vector<BlockHash> to_store;
  BlockHash parent = 0;
  std::int64_t computed_tokens = 0;
  double compute_seconds = 0;
};
// Worker queues hold request indices, and warm-ups from here on.
constexpr int kWarmUpIdBase = 1 << 30;

struct PrefillWorker {
  explicit PrefillWorker(std::int64_t capacity) : cache(capacity) {}
  BlockLru cache;
  std::deque<int> queue;
  int running = -1;
  std::uint64_t seq = 0;
  double slowdown = 1;
};

struct DecodeWorker {
  std::int64_t capacity = 0;
  std::int64_t used = 0;
  std::vector<int> active;
  std::deque<int> waiting;
  bool stepping = false;
  double step_started = 0;
};

enum class EventType { kArrival, kPrefillDone, kKvLanded, kDecodeStep };

struct Event {
  double time;
  std::uint64_t order;  // FIFO among equal times: deterministic runs
  EventType type;
  int id;  // request index or worker index
  bool operator>(const Event& o) const {
    return time != o.time ? time > o.time : order > o.order;
  }
};

class Simulation {
 public:
  Simulation(const Trace& trace, const SimConfig& config, routing::Policy& policy)
      : trace_(trace),
        config_(config),
        policy_(policy),
        index_(routing::KvIndex::Options{}),
        hold_(routing::PrefillQueue::Options{
            .depth = config.hold_every_policy || routing::PolicyHoldsPrefills(policy.name())
                         ? config.prefill_hold_depth
                         : 0,
            .aging = config.prefill_hold_aging}),
        warm_ups_(config.warm_up) {
    moves_held_ = config.held_moves.enabled && routing::PolicyMovesHeld(policy.name());
    cuts_prefills_ = routing::CutsPrefills(config.pieces, policy.name(), hold_.options().depth);
    if (!routing::PolicyWarmsUp(policy.name()))
      warm_ups_ = routing::WarmUpPlanner({.enabled = false});
  }

  absl::StatusOr<SimResult> Run() {
    if (absl::Status s = Setup(); !s.ok()) return s;
    for (std::size_t i = 0; i < trace_.requests.size(); ++i) {
      requests_[i].trace = &trace_.requests[i];
      requests_[i].arrival = trace_.requests[i].arrival_seconds / config_.speedup;
      Push(requests_[i].arrival, EventType::kArrival, static_cast<int>(i));
    }
    while (!events_.empty()) {
      const Event e = events_.top();
      events_.pop();
      now_ = e.time;
      switch (e.type) {
        case EventType::kArrival:
          if (absl::Status s = Arrive(e.id); !s.ok()) return s;
          break;
        case EventType::kPrefillDone: FinishPrefill(e.id); break;
        case EventType::kKvLanded: LandOnDecode(e.id); break;
        case EventType::kDecodeStep: FinishStep(e.id); break;
      }
    }
    return Summarise();
  }

 private:
  absl::Status Setup() {
    const SimConfig& c = config_;
    if (c.prefill_workers < 1 || c.decode_workers < 1 ||
        c.prefill_workers + c.decode_workers > routing::kMaxWorkers) {
      return absl::InvalidArgumentError(absl::StrCat(
          "need >= 1 prefill and >= 1 decode worker, at most ", routing::kMaxWorkers, " in all"));
    }
    if (c.capacity_blocks < 1 || c.decode_capacity_blocks < 0 || c.block_size < 1 ||
        !(c.speedup > 0)) {
      return absl::InvalidArgumentError("capacity, block size and speedup must be positive");
    }
    if (c.prefill_hold_depth < 0 || !(c.prefill_hold_aging >= 0)) {
      return absl::InvalidArgumentError("prefill hold depth and aging must not be negative");
    }
    if (!c.prefill_slowdown.empty() &&
        static_cast<int>(c.prefill_slowdown.size()) != c.prefill_workers) {
      return absl::InvalidArgumentError("one prefill slowdown per prefill worker");
    }
    for (int p = 0; p < c.prefill_workers; ++p) {
      prefill_.emplace_back(c.capacity_blocks);
      if (!c.prefill_slowdown.empty()) prefill_.back().slowdown = c.prefill_slowdown[p];
      if (!(prefill_.back().slowdown > 0)) {
        return absl::InvalidArgumentError("prefill slowdowns must be positive");
      }
      if (absl::Status s = table_.Add(p, routing::Role::kPrefill); !s.ok()) return s;
      if (absl::Status s = index_.AddWorker(p, /*incarnation=*/1); !s.ok()) return s;
    }
    const std::int64_t decode_capacity =
        c.decode_capacity_blocks > 0 ? c.decode_capacity_blocks : c.capacity_blocks;
    for (int d = 0; d < c.decode_workers; ++d) {
      decode_.emplace_back().capacity = decode_capacity;
      if (absl::Status s = table_.Add(DecodeSlot(d), routing::Role::kDecode); !s.ok()) return s;
    }
    requests_.resize(trace_.requests.size());
    return absl::OkStatus();
  }

  WorkerSlot DecodeSlot(int d) const { return config_.prefill_workers + d; }
  int DecodeIndex(WorkerSlot slot) const { return slot - config_.prefill_workers; }

  void Push(double time, EventType type, int id) { events_.push(Event{time, next_order_++, type, id}); }

  void SampleImbalance() {
    double worst = 0;
    bool any = false;
    for (routing::Role role : {routing::Role::kPrefill, routing::Role::kDecode}) {
      double sum = 0, max = 0;
      int n = 0;
      for (const routing::WorkerState& s : table_.states()) {
        if (s.role != role) continue;
        sum += s.in_flight;
        max = std::max<double>(max, s.in_flight);
        ++n;
      }
      // Below one request per worker max/mean only measures how few requests there are.
      if (n == 0 || sum < n) continue;
      worst = std::max(worst, max / (sum / n));
      any = true;
    }
    if (!any) return;
    imbalance_max_ = std::max(imbalance_max_, worst);
    imbalance_sum_ += worst;
    ++imbalance_samples_;
  }

  absl::Status Arrive(int id) {
    RequestState& r = requests_[id];
    const TraceRequest& t = *r.trace;
    SampleImbalance();
    routing::RouteRequest request{.block_hashes = t.chain,
                                  .prompt_tokens = t.input_length,
                                  .block_size = config_.block_size,
                                  .max_output_tokens = t.output_length};
    absl::StatusOr<routing::RouteDecision> decision =
        policy_.Route(request, routing::ClusterView{
        .index = &index_, .workers = table_.states(), .now_seconds = now_});
    if (!decision.ok()) return decision.status();
    if (decision->prefill < 0 || decision->prefill >= config_.prefill_workers ||
        DecodeIndex(decision->decode) < 0 ||
        DecodeIndex(decision->decode) >= config_.decode_workers) {
      return absl::InternalError(
          absl::StrCat("policy ", policy_.name(), " chose a worker outside its pool"));
    }
    index_.Touch(t.chain);
    r.prefill = decision->prefill;
    r.decode = decision->decode;
    r.blocks = static_cast<std::int64_t>(t.chain.size());
    r.predicted_uncached = t.input_length - decision->predicted_cached_tokens;
    if (config_.per_request != nullptr) {
      r.chosen_cached_blocks = prefill_[r.prefill].cache.LeadingRun(t.chain);
      for (const PrefillWorker& w : prefill_) {
        r.best_cached_blocks = std::max(r.best_cached_blocks, w.cache.LeadingRun(t.chain));
      }
    }
    r.decode_blocks = (t.input_length + t.output_length + config_.block_size - 1) / config_.block_size;
    const std::optional<routing::WarmUp> warm_up = warm_ups_.Plan(
        t.chain, r.prefill,
        routing::ClusterView{.index = &index_, .workers = table_.states(), .now_seconds = now_},
        now_);
    table_.OnPrefillDispatched(r.prefill, r.predicted_uncached, r.blocks, now_);
    table_.OnDecodeDispatched(r.decode, r.decode_blocks);
    if (hold_.Enqueue(static_cast<routing::PrefillQueue::Ticket>(id), r.prefill,
                      PredictedSeconds(r), now_, r.predicted_uncached)) {
      SendToWorker(id);
    }
    if (warm_up.has_value()) StartWarmUp(*warm_up, t.chain);
    return absl::OkStatus();
  }

  // The warm-up goes straight to its idle worker: nothing is held for it, no request waits on it.
  void StartWarmUp(const routing::WarmUp& plan, std::span<const BlockHash> chain) {
    WarmUpJob job;
    job.chain = chain.first(plan.blocks);
    job.predicted_uncached =
        static_cast<std::int64_t>(plan.blocks - plan.cached_blocks) * config_.block_size;
    table_.OnPrefillDispatched(plan.worker, job.predicted_uncached, plan.blocks, now_);
    warm_up_jobs_.push_back(std::move(job));
    prefill_[plan.worker].queue.push_back(kWarmUpIdBase + static_cast<int>(warm_up_jobs_.size()) -
                                          1);
    if (prefill_[plan.worker].running < 0) StartPrefill(plan.worker);
  }

  void SendToWorker(int id) {
    const WorkerSlot p = requests_[id].prefill;
    PrefillWorker& w = prefill_[p];
    w.queue.push_back(id);
    if (w.running < 0) StartPrefill(p);
  }

  void Publish(WorkerSlot p, KvEvent::Kind kind, BlockHash parent, std::vector<BlockHash> hashes) {
    if (hashes.empty()) return;
    KvEvent event;
    event.seq = ++prefill_[p].seq;
    event.kind = kind;
    event.parent_hash = parent;
    event.block_hashes = std::move(hashes);
    absl::StatusOr<routing::EventOutcome> outcome = index_.Apply(p, event);
    if (!outcome.ok() || *outcome != routing::EventOutcome::kApplied) ++index_gaps_;
  }

  // Late binding (routing::PickHeldMove): p fell idle while prefills wait in the hold queue for
  // busy workers; one of them may start here instead.
  void MoveHeldTo(WorkerSlot p) {
    if (!moves_held_ || hold_.total_held() == 0) return;
    const std::optional<routing::HeldMove> move = routing::PickHeldMove(
        hold_, p, table_.states(), now_, config_.held_moves, [&](routing::PrefillQueue::Ticket t) {
          // The index's view of p, as the router has it (the simulated events arrive at once).
          const TraceRequest& trace = *requests_[t].trace;
          return routing::UncachedTokensOn(index_, trace.chain, trace.input_length,
                                           config_.block_size, p);
        });
    if (!move.has_value()) return;
    const int id = static_cast<int>(move->ticket);
    RequestState& r = requests_[id];
    const bool started =
        routing::ApplyHeldMove(*move, p, r.predicted_uncached, r.blocks, now_,
                               config_.prefill_seconds_per_token, &table_, &hold_);
    r.prefill = p;
    r.predicted_uncached = move->uncached_tokens;
    r.piece_end = 0;  // its pieces are on the worker it left
    ++held_moves_;
    if (started) prefill_[p].queue.push_back(id);
  }

  // The router's prediction, as PrefixRouter makes it: uncached tokens at its learnt speed, not
  // the worker's true one (before the first sample the simulated per-token cost stands in for
  // the router's prior; at the defaults they are equal).
  double PredictedSeconds(const RequestState& r) const {
    return static_cast<double>(r.predicted_uncached) *
           table_.states()[r.prefill].PrefillSecondsPerToken(config_.prefill_seconds_per_token);
  }

  void StartPrefill(WorkerSlot p) {
    PrefillWorker& w = prefill_[p];
    if (w.queue.empty()) MoveHeldTo(p);
    if (w.queue.empty()) {
      w.running = -1;
      return;
    }
    const int id = w.queue.front();
    w.queue.pop_front();
    w.running = id;
    if (id >= kWarmUpIdBase) {
      StartWarmUpCompute(p, warm_up_jobs_[id - kWarmUpIdBase]);
      return;
    }
    RequestState& r = requests_[id];
    const TraceRequest& t = *r.trace;
    std::span<const BlockHash> chain = t.chain;
    r.piece = false;
    if (cuts_prefills_) {
      // Without the piece's own record a prompt longer than the worker's cache would be cut
      // again from where its evictions left it, forever.
      const std::optional<routing::PrefillPiece> piece = routing::NextPiece(
          config_.pieces, t.input_length, w.cache.LeadingRun(chain) * config_.block_size,
          r.piece_end, config_.block_size,
          table_.states()[p].PrefillSecondsPerToken(config_.prefill_seconds_per_token),
          hold_.held(p) > 0, /*cut_limit_tokens=*/-1);
      if (piece.has_value()) {
        chain = chain.first(static_cast<std::size_t>(piece->end_tokens / config_.block_size));
        r.piece = true;
        r.piece_end = piece->end_tokens;
      }
    }
    const std::int64_t run = TakeIntoCache(p, chain, &r.to_store, &r.parent);
    const std::int64_t hit = std::min(run * config_.block_size, t.input_length);
    r.computed_tokens = r.piece
                            ? (static_cast<std::int64_t>(chain.size()) - run) * config_.block_size
                            : t.input_length - hit;
    r.total_computed += r.computed_tokens;
    if (r.started < 0) r.started = now_;
    r.compute_seconds = ComputeSeconds(p, r.computed_tokens);
    Push(now_ + r.compute_seconds, EventType::kPrefillDone, p);
  }

  void StartWarmUpCompute(WorkerSlot p, WarmUpJob& job) {
    const std::int64_t run = TakeIntoCache(p, job.chain, &job.to_store, &job.parent);
    job.computed_tokens = (static_cast<std::int64_t>(job.chain.size()) - run) * config_.block_size;
    job.compute_seconds = ComputeSeconds(p, job.computed_tokens);
    warm_up_tokens_ += job.computed_tokens;
    Push(now_ + job.compute_seconds, EventType::kPrefillDone, p);
  }

  // Worker p starts computing `chain`: its cached leading run (returned) is a hit, the rest takes
  // room in its cache now (evictions published at once); `to_store` gets the new blocks the cache
  // kept, announced when the compute ends, under `parent`.
  std::int64_t TakeIntoCache(WorkerSlot p, std::span<const BlockHash> chain,
                             std::vector<BlockHash>* to_store, BlockHash* parent) {
    PrefillWorker& w = prefill_[p];
    const std::int64_t run = w.cache.LeadingRun(chain);
    std::vector<BlockHash> evicted;
    w.cache.Use(chain, &evicted);
    Publish(p, KvEvent::Kind::kRemoved, 0, std::move(evicted));
    to_store->clear();
    for (BlockHash h : chain.subspan(run)) {
      if (w.cache.Contains(h)) to_store->push_back(h);
    }
    *parent = run > 0 ? chain[run - 1] : 0;
    return run;
  }

  double ComputeSeconds(WorkerSlot p, std::int64_t tokens) const {
    return config_.prefill_overhead_seconds +
           static_cast<double>(tokens) * config_.prefill_seconds_per_token * prefill_[p].slowdown;
  }

  void FinishWarmUp(WorkerSlot p, WarmUpJob& job) {
    Publish(p, KvEvent::Kind::kStored, job.parent, std::move(job.to_store));
    table_.OnPrefillFinished(p, job.predicted_uncached, static_cast<std::int64_t>(job.chain.size()),
                             job.computed_tokens, job.compute_seconds, now_);
    warm_ups_.Done(job.chain.back(), now_);
    StartPrefill(p);
  }

  void FinishPrefill(WorkerSlot p) {
    PrefillWorker& w = prefill_[p];
    const int id = w.running;
    if (id >= kWarmUpIdBase) {
      FinishWarmUp(p, warm_up_jobs_[id - kWarmUpIdBase]);
      return;
    }
    RequestState& r = requests_[id];
    // The KV exists once computed: that is when the worker announces it.
    Publish(p, KvEvent::Kind::kStored, r.parent, std::move(r.to_store));
    if (r.piece) {
      FinishPiece(p, id, r);
      return;
    }
    hit_tokens_ +=
        static_cast<double>(std::max<std::int64_t>(0, r.trace->input_length - r.total_computed));
    prompt_tokens_ += static_cast<double>(r.trace->input_length);
    table_.OnPrefillFinished(p, r.predicted_uncached, r.blocks, r.computed_tokens, r.compute_seconds,
                             now_);
    const double landed = now_ + static_cast<double>(r.blocks) * config_.kv_transfer_seconds_per_block;
    ttft_.push_back(landed - r.arrival);
    if (config_.per_request != nullptr) {
      config_.per_request->push_back(RequestRecord{.arrival = r.arrival,
                                                   .prompt_tokens = r.trace->input_length,
                                                   .computed_tokens = r.total_computed,
                                                   .wait = r.started - r.arrival,
                                                   .ttft = landed - r.arrival,
                                                   .prefill_worker = p,
                                                   .chosen_cached_blocks = r.chosen_cached_blocks,
                                                   .best_cached_blocks = r.best_cached_blocks});
    }
    r.last_token = landed;
    Push(landed, EventType::kKvLanded, id);
    SendReleased(hold_.Done(static_cast<routing::PrefillQueue::Ticket>(id)));
    StartPrefill(p);
  }

  void SendReleased(const std::vector<routing::PrefillQueue::Ticket>& released) {
    for (routing::PrefillQueue::Ticket next : released) {
      prefill_[requests_[next].prefill].queue.push_back(static_cast<int>(next));
    }
  }

  // A piece is done: the rest of the prompt is held again (keeping its time in the queue), and
  // whatever is held first for this worker runs next.
  void FinishPiece(WorkerSlot p, int id, RequestState& r) {
    ++prefill_pieces_;
    const std::int64_t piece_uncached = std::min(r.predicted_uncached, r.computed_tokens);
    const std::int64_t rest = r.predicted_uncached - piece_uncached;
    SendReleased(routing::ApplyPieceDone(static_cast<routing::PrefillQueue::Ticket>(id), p,
                                         piece_uncached, r.computed_tokens, r.compute_seconds, rest,
                                         now_, config_.prefill_seconds_per_token, &table_, &hold_));
    r.predicted_uncached = rest;
    StartPrefill(p);
  }

  void LandOnDecode(int id) {
    const int d = DecodeIndex(requests_[id].decode);
    decode_[d].waiting.push_back(id);
    Admit(d);
  }

  void Admit(int d) {
    DecodeWorker& w = decode_[d];
    while (!w.waiting.empty()) {
      RequestState& r = requests_[w.waiting.front()];
      // An oversized request still runs alone rather than never.
      if (w.used + r.decode_blocks > w.capacity && !w.active.empty()) break;
      const int id = w.waiting.front();
      w.waiting.pop_front();
      r.tokens_left = r.trace->output_length - 1;  // the first token came from prefill
      if (r.tokens_left <= 0) {
        Finish(d, id);
        continue;
      }
      w.used += r.decode_blocks;
      w.active.push_back(id);
    }
    if (!w.stepping && !w.active.empty()) StartStep(d);
  }

  void StartStep(int d) {
    DecodeWorker& w = decode_[d];
    w.stepping = true;
    w.step_started = now_;
    const double step = config_.decode_base_seconds +
                        config_.decode_per_sequence_seconds * static_cast<double>(w.active.size()) +
                        config_.decode_per_block_seconds * static_cast<double>(w.used);
    Push(now_ + step, EventType::kDecodeStep, d);
  }

  void FinishStep(int d) {
    DecodeWorker& w = decode_[d];
    w.stepping = false;
    table_.OnDecodeStep(DecodeSlot(d), static_cast<int>(w.active.size()), now_ - w.step_started);
    std::vector<int> still;
    still.reserve(w.active.size());
    for (int id : w.active) {
      RequestState& r = requests_[id];
      itl_.push_back(now_ - r.last_token);
      r.last_token = now_;
      if (--r.tokens_left > 0) {
        still.push_back(id);
      } else {
        w.used -= r.decode_blocks;
        Finish(d, id);
      }
    }
    w.active.swap(still);
    Admit(d);
  }

  void Finish(int d, int id) {
    table_.OnDecodeFinished(DecodeSlot(d), requests_[id].decode_blocks);
    last_completion_ = std::max(last_completion_, now_);
  }

  SimResult Summarise() {
    SimResult out;
    out.policy = std::string(policy_.name());
    out.held = hold_.options().depth > 0;
    out.requests = static_cast<std::int64_t>(trace_.requests.size());
    out.hit_rate = prompt_tokens_ > 0 ? hit_tokens_ / prompt_tokens_ : 0;
    // One pass over the trace serves both bounds.
    const std::vector<std::int64_t> misses = InfiniteCacheMisses(trace_, config_.block_size);
    out.hit_rate_bound = HitRateGivenMisses(trace_, misses);
    out.ttft_p90_floor = TtftP90Floor(trace_, config_, misses);
    out.ttft_p90_oracle = TtftP90Oracle(trace_, config_, misses);
    out.ttft_p50 = Percentile(ttft_, 0.50);
    out.ttft_p90 = Percentile(ttft_, 0.90);
    out.ttft_p99 = Percentile(ttft_, 0.99);
    out.itl_p50 = Percentile(itl_, 0.50);
    out.itl_p99 = Percentile(itl_, 0.99);
    out.imbalance_max = imbalance_max_;
    out.imbalance_mean = imbalance_samples_ > 0 ? imbalance_sum_ / imbalance_samples_ : 0;
    out.simulated_seconds = last_completion_;
    out.index_gaps = index_gaps_;
    out.held_moves = held_moves_;
    out.prefill_pieces = prefill_pieces_;
    out.warm_ups = warm_ups_.planned();
    out.warm_up_tokens = warm_up_tokens_;
    return out;
  }

  const Trace& trace_;
  const SimConfig& config_;
  routing::Policy& policy_;
  routing::KvIndex index_;
  routing::PrefillQueue hold_;
  routing::WarmUpPlanner warm_ups_;
  std::vector<WarmUpJob> warm_up_jobs_;
  std::int64_t warm_up_tokens_ = 0;
  bool moves_held_ = false;
  bool cuts_prefills_ = false;
  std::int64_t held_moves_ = 0;
  std::int64_t prefill_pieces_ = 0;
  routing::WorkerTable table_;
  std::vector<PrefillWorker> prefill_;
  std::vector<DecodeWorker> decode_;
  std::vector<RequestState> requests_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  std::uint64_t next_order_ = 0;
  double now_ = 0;
  double hit_tokens_ = 0;
  double prompt_tokens_ = 0;
  std::vector<double> ttft_;
  std::vector<double> itl_;
  double imbalance_max_ = 0;
  double imbalance_sum_ = 0;
  std::int64_t imbalance_samples_ = 0;
  double last_completion_ = 0;
  std::int64_t index_gaps_ = 0;
};

}  // namespace

absl::StatusOr<SimResult> Simulate(const Trace& trace, const SimConfig& config,
                                   routing::Policy& policy) {
  Simulation simulation(trace, config, policy);
  return simulation.Run();
}

}  // namespace tandem::sim
