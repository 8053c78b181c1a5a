#include <atomic>

#include "absl/strings/str_cat.h"
#include "kv_handoff.h"
#include "tandem/base/hash.h"

namespace tandem::worker {

using Clock = std::chrono::steady_clock;

// Long enough for any in-flight ReserveKv to arrive; bounded so that Cancels of ids that never
// reserve (most of them) cost nothing lasting.
constexpr std::chrono::seconds kCancelledEarlyTtl{30};
constexpr std::size_t kMaxCancelledEarly = 1 << 16;

std::uint64_t HandoffFlagValue(const std::string& handoff_id) {
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(handoff_id.data());
  // Never 0: 0 is what a flag holds before its block arrives.
  return StableHash64({bytes, handoff_id.size()}, 0x6b76666c6167ULL) | 1ULL;
}

KvReceiver::KvReceiver(serving::EngineLoop* loop, transport::TransferAgent* agent,
                       std::string worker_id)
    : loop_(loop), agent_(agent), worker_id_(std::move(worker_id)) {}

absl::StatusOr<std::unique_ptr<KvReceiver>> KvReceiver::Create(serving::EngineLoop* loop,
                                                               transport::TransferAgent* agent,
                                                               std::string worker_id) {
  std::unique_ptr<KvReceiver> r(new KvReceiver(loop, agent, std::move(worker_id)));
  absl::Status st = loop->RunOnLoop([&](engine::Engine& e) {
    r->storage_ = e.block_manager().storage();
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  const std::size_t pool_bytes =
      static_cast<std::size_t>(r->storage_.num_blocks) * r->storage_.block_floats() * sizeof(float);
  auto pool = agent->RegisterMemory(r->storage_.base, pool_bytes);
  if (!pool.ok()) return pool.status();
  r->pool_registration_ = std::move(*pool);
  r->flags_.assign(r->storage_.num_blocks, 0);
  auto flags = agent->RegisterMemory(r->flags_.data(), r->flags_.size() * sizeof(std::uint64_t));
  if (!flags.ok()) return flags.status();
  r->flag_registration_ = std::move(*flags);
  r->sweeper_ = std::thread([raw = r.get()] { raw->Sweep(); });
  r->progress_ = std::thread([raw = r.get()] { raw->ProgressWhileOpen(); });
  return r;
}

KvReceiver::~KvReceiver() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  open_cv_.notify_all();
  if (sweeper_.joinable()) sweeper_.join();
  if (progress_.joinable()) progress_.join();
}

void KvReceiver::ProgressWhileOpen() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      open_cv_.wait(lock, [&] { return stopping_ || !handoffs_.empty(); });
      if (stopping_) return;
    }
    agent_->Progress();
    // Bounded so that a missed wakeup costs a millisecond at most.
    agent_->WaitForActivity(std::chrono::milliseconds(1));
  }
}

absl::StatusOr<v1::KvTarget> KvReceiver::Reserve(const std::string& request_id, int num_tokens,
                                                 std::chrono::milliseconds lease) {
  if (request_id.empty()) return absl::InvalidArgumentError("request_id is required");
  if (num_tokens <= 0) return absl::InvalidArgumentError("num_tokens must be positive");
  if (lease.count() <= 0) lease = std::chrono::milliseconds(10000);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (by_request_.contains(request_id)) {
      return absl::AlreadyExistsError(absl::StrCat("request ", request_id, " already holds KV"));
    }

  }
  std::vector<std::int32_t> blocks;
  // The reservation also holds the request's place in the engine: once the prefill has sent the
  // first token, Commit must never be refused for capacity.
  absl::Status st = loop_->ReservePlace([&](engine::Engine& e) -> absl::Status {
    auto reserved = e.ReserveBlocks(num_tokens);
    if (!reserved.ok()) return reserved.status();
    blocks = std::move(*reserved);
    return absl::OkStatus();
  });
  if (!st.ok()) return st;

  v1::KvTarget target;
  std::string handoff_id;
  bool cancelled_early = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Checked where the reservation is published, so a Cancel arriving at any point before is
    // seen either here or by Abandon.
    if (auto c = cancelled_early_.find(request_id); c != cancelled_early_.end()) {
      cancelled_early = Clock::now() < c->second;
      cancelled_early_.erase(c);
    }
    if (!cancelled_early) {
      handoff_id = absl::StrCat(worker_id_, "/", next_handoff_++);
      const std::uint64_t flag_value = HandoffFlagValue(handoff_id);
      // Reset before publishing the addresses: the flag must not hold a value from the last user.
      for (std::int32_t b : blocks) std::atomic_ref<std::uint64_t>(flags_[b]).store(0);
      Handoff h{request_id, blocks, flag_value, Clock::now() + lease, false};
      handoffs_.emplace(handoff_id, std::move(h));
      by_request_.emplace(request_id, handoff_id);
    }
  }
  if (cancelled_early) {
    loop_->ReleasePlace();
    ReleaseBlocks(std::move(blocks));
    // Aborted, not Cancelled: a router still waiting for this call (none should be) retries the
    // request elsewhere instead of taking the worker for gone.
    return absl::AbortedError(
        absl::StrCat("request ", request_id, " was cancelled before its reservation arrived"));
  }
  open_cv_.notify_all();
  const std::uint64_t block_bytes = storage_.block_floats() * sizeof(float);
  target.set_decode_worker_id(worker_id_);
  target.set_ucx_address(agent_->local_address());
  target.set_block_bytes(static_cast<std::uint32_t>(block_bytes));
  target.set_handoff_id(handoff_id);
  target.set_lease_ms(static_cast<std::uint32_t>(lease.count()));
  const auto& pool = pool_registration_->descriptor();
  const auto& flags = flag_registration_->descriptor();
  for (std::int32_t b : blocks) {
    auto* rb = target.add_blocks();
    rb->set_remote_addr(pool.base + static_cast<std::uint64_t>(b) * block_bytes);
    rb->set_flag_addr(flags.base + static_cast<std::uint64_t>(b) * sizeof(std::uint64_t));
  }
  // One key per region, not per block: the receiver registered each region once.
  if (target.blocks_size() > 0) {
    target.mutable_blocks(0)->set_rkey(pool.remote_key);
    target.mutable_blocks(0)->set_flag_rkey(flags.remote_key);
  }
  return target;
}

bool KvReceiver::AllFlagsSet(const Handoff& h) const {
  for (std::int32_t b : h.blocks) {
    // Acquire pairs with the transport's completion: block data landed before its flag.
    if (std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(flags_[b]))
            .load(std::memory_order_acquire) != h.flag_value) {
      return false;
    }
  }
  return true;
}

absl::Status KvReceiver::Commit(const std::string& handoff_id, const std::string& request_id,
                                std::vector<std::int32_t> prompt, std::int32_t first_token,
                                const engine::SamplingParams& params,
                                kv::TrafficClass traffic_class, serving::UpdateSink sink,
                                int resumed_tokens, std::vector<engine::InputImage> images) {
  Handoff h;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = handoffs_.find(handoff_id);
    if (it == handoffs_.end() || it->second.abandoned) {
      return absl::NotFoundError(absl::StrCat("no KV handoff ", handoff_id,
                                              " (expired, already used, or never reserved)"));
    }
    if (it->second.request_id != request_id) {
      return absl::InvalidArgumentError("handoff belongs to another request");
    }
    if (it->second.committing) return absl::AlreadyExistsError("handoff is already committing");
    it->second.committing = true;
    h = it->second;
  }
  const int needed_blocks =
      (static_cast<int>(prompt.size()) + storage_.block_size - 1) / storage_.block_size;
  absl::Status st;
  if (needed_blocks != static_cast<int>(h.blocks.size())) {
    st = absl::InvalidArgumentError(absl::StrCat("prompt needs ", needed_blocks,
                                                 " blocks, the reservation has ", h.blocks.size()));
  }
  // Gate: the engine sees the blocks only once every flag is in.
  while (st.ok() && !AllFlagsSet(h)) {
    if (Clock::now() > h.deadline) {
      st = absl::DeadlineExceededError("KV blocks did not arrive before the handoff lease ran out");
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (st.ok()) {
    st = loop_->SubmitWith(
        request_id, std::move(sink),
        [&](engine::Engine& e) {
          return e.AddPrefilledRequest(request_id, prompt, first_token, params, h.blocks,
                                       traffic_class, resumed_tokens, std::move(images));
        },
        /*uses_reserved_place=*/true);
  } else {
    loop_->ReleasePlace();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    handoffs_.erase(handoff_id);
    by_request_.erase(request_id);
    if (st.ok()) ++completed_total_;
  }
  // On success the engine owns the blocks now; otherwise they go back to the pool.
  if (!st.ok()) ReleaseBlocks(h.blocks);
  return st;
}

void KvReceiver::Abandon(const std::string& request_id) {
  std::vector<std::int32_t> blocks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto r = by_request_.find(request_id);
    if (r == by_request_.end()) {
      if (cancelled_early_.size() < kMaxCancelledEarly) {
        cancelled_early_[request_id] = Clock::now() + kCancelledEarlyTtl;
      }
      return;
    }
    auto it = handoffs_.find(r->second);
    if (it == handoffs_.end() || it->second.committing) return;
    // The request id is free again at once (a retry may reserve under it).
    by_request_.erase(r);
    if (AllFlagsSet(it->second)) {
      blocks = std::move(it->second.blocks);  // the sender is done: nothing more will land
      handoffs_.erase(it);
    } else {
      it->second.abandoned = true;  // the sweeper frees the blocks (see Abandon's comment)
    }
  }
  loop_->ReleasePlace();
  ReleaseBlocks(std::move(blocks));
}

void KvReceiver::ReleaseBlocks(std::vector<std::int32_t> blocks) {
  if (blocks.empty()) return;
  loop_->RunOnLoop([&](engine::Engine& e) {
         e.ReleaseBlocks(blocks);
         return absl::OkStatus();
       })
      .IgnoreError();  // only fails at shutdown, when the pool goes away anyway
}

void KvReceiver::Sweep() {
  for (;;) {
    std::vector<std::vector<std::int32_t>> expired, quarantine_over;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stop_cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return stopping_; })) return;
      const auto now = Clock::now();
      absl::erase_if(cancelled_early_, [&](const auto& c) { return c.second <= now; });
      for (auto it = handoffs_.begin(); it != handoffs_.end();) {
        Handoff& h = it->second;
        if (h.abandoned && (AllFlagsSet(h) || now > h.deadline)) {
          // Out of quarantine; its place went back when it was abandoned.
          quarantine_over.push_back(std::move(h.blocks));
          handoffs_.erase(it++);
        } else if (!h.abandoned && !h.committing && now > h.deadline) {
          expired.push_back(std::move(h.blocks));
          by_request_.erase(h.request_id);
          handoffs_.erase(it++);
          ++expired_total_;
        } else {
          ++it;
        }
      }
    }
    for (auto& blocks : expired) {
      loop_->ReleasePlace();
      ReleaseBlocks(std::move(blocks));
    }
    for (auto& blocks : quarantine_over) ReleaseBlocks(std::move(blocks));
  }
}

KvReceiverStats KvReceiver::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  KvReceiverStats s;
  for (const auto& [id, h] : handoffs_) {
    if (h.abandoned) {
      s.quarantined_blocks += static_cast<int>(h.blocks.size());
    } else {
      s.reserved_blocks += static_cast<int>(h.blocks.size());
      ++s.active_handoffs;
    }
  }
  s.expired_total = expired_total_;
  s.completed_total = completed_total_;
  return s;
}

}  // namespace tandem::worker
