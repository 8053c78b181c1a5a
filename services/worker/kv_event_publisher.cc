#include "kv_event_publisher.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "grpcpp/client_context.h"

namespace tandem::worker {
namespace {

v1::KvTier ToProto(kv::KvTier tier) {
  switch (tier) {
    case kv::KvTier::kDevice: return v1::KV_TIER_DEVICE;
    case kv::KvTier::kHost: return v1::KV_TIER_HOST;
    case kv::KvTier::kDisk: return v1::KV_TIER_DISK;
  }
  return v1::KV_TIER_UNSPECIFIED;
}

}  // namespace

// One PublishKvEvents call: the pump thread writes, a reader thread takes acks.
struct KvEventPublisher::Stream {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::KvEventBatch, v1::KvEventAck>> rpc;
  std::atomic<bool> broken{false};
  std::atomic<bool> acked{false};  // the router answered: it implements the call
  std::thread reader;
};

KvEventPublisher::KvEventPublisher(std::shared_ptr<grpc::Channel> channel,
                                   KvEventPublisherOptions options, kv::TieredKvStore* store)
    : options_(std::move(options)),
      store_(store),
      stub_(v1::RouterControl::NewStub(std::move(channel))) {
  for (const auto& [hash, copies] : options_.initial_device_blocks) {
    mirror_[v1::KV_TIER_DEVICE][hash] = copies;
  }
  if (store_ != nullptr) {
    // A warm restart's disk blocks are in here: the first snapshot re-announces them.
    const kv::StoreSnapshot snapshot = store_->Snapshot();
    std::lock_guard<std::mutex> lock(mu_);
    RebuildLowerTiers(snapshot);
    store_seq_ = snapshot.seq;
  }
  thread_ = std::thread([this] { Run(); });
}

KvEventPublisher::~KvEventPublisher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void KvEventPublisher::OnDeviceEvent(const engine::KvCacheEvent& event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Apply(v1::KV_TIER_DEVICE, event.kind == engine::KvCacheEvent::Kind::kStored,
          event.block_hash, event.parent_hash);
  }
  cv_.notify_all();
}

void KvEventPublisher::RequestSnapshot() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    snapshot_needed_ = true;
  }
  cv_.notify_all();
}

KvEventPublisherStats KvEventPublisher::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  KvEventPublisherStats s = stats_;
  s.pending_events = outbox_.size();
  return s;
}

void KvEventPublisher::Apply(v1::KvTier tier, bool stored, std::uint64_t hash,
                             std::uint64_t parent) {
  Mirror& held = mirror_[tier];
  if (stored) {
    if (held[hash]++ > 0) return;  // another class already announced it
  } else {
    auto it = held.find(hash);
    if (it == held.end()) return;
    if (--it->second > 0) return;
    held.erase(it);
  }
  // Without a stream, or with a snapshot due, the snapshot will carry the change.
  if (!streaming_ || snapshot_needed_) return;
  if (outbox_.size() >= options_.max_pending_events) {
    stats_.events_dropped += outbox_.size();
    outbox_.clear();
    snapshot_needed_ = true;
    return;
  }
  v1::KvEvent event;
  event.set_seq(next_seq_++);
  if (stored) {
    v1::KvBlocksStored* s = event.mutable_stored();
    s->set_tier(tier);
    s->set_parent_hash(parent);
    s->add_block_hashes(hash);
  } else {
    v1::KvBlocksRemoved* r = event.mutable_removed();
    r->set_tier(tier);
    r->add_block_hashes(hash);
  }
  outbox_.push_back(std::move(event));
}

void KvEventPublisher::RebuildLowerTiers(const kv::StoreSnapshot& snapshot) {
  mirror_[v1::KV_TIER_HOST].clear();
  mirror_[v1::KV_TIER_DISK].clear();
  for (const kv::BlockRecord& r : snapshot.host) ++mirror_[v1::KV_TIER_HOST][r.key.hash];
  for (const kv::BlockRecord& r : snapshot.disk) ++mirror_[v1::KV_TIER_DISK][r.key.hash];
}

KvEventPublisher::PendingSnapshot KvEventPublisher::TakeSnapshot() {
  PendingSnapshot snapshot;
  snapshot.seq = next_seq_++;
  for (v1::KvTier tier : {v1::KV_TIER_DEVICE, v1::KV_TIER_HOST, v1::KV_TIER_DISK}) {
    std::vector<std::uint64_t>& hashes = snapshot.tiers[tier];
    hashes.reserve(mirror_[tier].size());
    for (const auto& [hash, copies] : mirror_[tier]) hashes.push_back(hash);
  }
  // Everything queued before it is contained in it.
  outbox_.clear();
  snapshot_needed_ = false;
  ++stats_.snapshots_sent;
  return snapshot;
}

v1::KvEvent KvEventPublisher::PendingSnapshot::ToProto() {
  v1::KvEvent event;
  event.set_seq(seq);
  for (v1::KvTier tier : {v1::KV_TIER_DEVICE, v1::KV_TIER_HOST, v1::KV_TIER_DISK}) {
    v1::KvSnapshot::TierBlocks* blocks = event.mutable_snapshot()->add_tiers();
    blocks->set_tier(tier);
    std::sort(tiers[tier].begin(), tiers[tier].end());  // deterministic messages
    blocks->mutable_block_hashes()->Add(tiers[tier].begin(), tiers[tier].end());
  }
  return event;
}

void KvEventPublisher::IngestStoreEvents() {
  if (store_ == nullptr) return;
  for (;;) {
    absl::StatusOr<std::vector<kv::KvEvent>> events =
        store_->events().ReadAfter(store_seq_, options_.max_batch_events);
    if (!events.ok()) {
      // The log wrapped past what we read: resync those tiers from the store and tell the
      // router with a snapshot.
      const kv::StoreSnapshot snapshot = store_->Snapshot();
      std::lock_guard<std::mutex> lock(mu_);
      RebuildLowerTiers(snapshot);
      store_seq_ = snapshot.seq;
      snapshot_needed_ = true;
      continue;
    }
    if (events->empty()) return;
    std::lock_guard<std::mutex> lock(mu_);
    for (const kv::KvEvent& e : *events) {
      Apply(ToProto(e.tier), e.kind == kv::KvEvent::Kind::kStored, e.key.hash, e.parent_hash);
      store_seq_ = e.seq;
    }
  }
}

bool KvEventPublisher::SendPending(Stream& stream) {
  for (;;) {
    v1::KvEventBatch batch;
    std::optional<PendingSnapshot> snapshot;
    std::vector<v1::KvEvent> deltas;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (snapshot_needed_) snapshot = TakeSnapshot();
      while (!outbox_.empty() &&
             deltas.size() < options_.max_batch_events) {
        deltas.push_back(std::move(outbox_.front()));
        outbox_.pop_front();
      }
    }
    // Built outside the lock: the engine thread's OnDeviceEvent never waits for a large sort.
    if (snapshot.has_value()) *batch.add_events() = snapshot->ToProto();
    for (v1::KvEvent& e : deltas) *batch.add_events() = std::move(e);
    if (batch.events_size() == 0) return true;
    batch.set_worker_id(options_.worker_id);
    batch.set_incarnation(options_.incarnation);
    if (!stream.rpc->Write(batch)) return false;
    last_sent_seq_ = batch.events(batch.events_size() - 1).seq();
    std::lock_guard<std::mutex> lock(mu_);
    for (const v1::KvEvent& e : batch.events()) {
      if (!e.has_snapshot()) ++stats_.events_sent;
    }
  }
}

bool KvEventPublisher::Wait(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, d, [&] { return stopping_; });
  return !stopping_;
}

void KvEventPublisher::Run() {
  auto backoff = std::chrono::milliseconds(100);
  for (;;) {
    auto stream = std::make_unique<Stream>();
    stream->rpc = stub_->PublishKvEvents(&stream->context);
    Stream* raw = stream.get();
    stream->reader = std::thread([this, raw] {
      v1::KvEventAck ack;
      while (raw->rpc->Read(&ack)) {
        raw->acked = true;
        if (ack.resend_snapshot()) RequestSnapshot();
      }
      raw->broken = true;
      cv_.notify_all();
    });
    {
      std::lock_guard<std::mutex> lock(mu_);
      streaming_ = true;
      snapshot_needed_ = true;  // a new stream always starts from a snapshot
      ++stats_.streams_opened;
    }
    bool stop = false;
    for (;;) {
      IngestStoreEvents();
      if (stream->broken || !SendPending(*stream)) break;
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, options_.poll_interval, [&] {
        return stopping_ || stream->broken.load() || snapshot_needed_ || !outbox_.empty();
      });
      if (stopping_) {
        stop = true;
        break;
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      streaming_ = false;
      outbox_.clear();
    }
    stream->rpc->WritesDone();
    stream->context.TryCancel();
    stream->reader.join();
    const grpc::Status finished = stream->rpc->Finish();
    (void)finished;  // why it ended does not change what we do: retry, snapshot first
    if (stop) return;
    // A router that acknowledged was working and went away (restart): retry soon. One that never
    // answered is down or does not implement the call yet: back off.
    backoff = stream->acked ? std::chrono::milliseconds(100)
                            : std::min(backoff * 2, options_.max_backoff);
    if (!Wait(backoff)) return;
  }
}

}  // namespace tandem::worker
