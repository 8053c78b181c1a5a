#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "grpcpp/channel.h"
#include "tandem/engine/block_manager.h"
#include "tandem/kv/tiered_kv_store.h"
#include "tandem/v1/router_control.grpc.pb.h"

namespace tandem::worker {

struct KvEventPublisherOptions {
  std::string worker_id;
  std::uint64_t incarnation = 0;
  // Deltas queued for the router; beyond this (router slow or gone) they are dropped and the
  // next message is a snapshot instead, so memory stays bounded.
  std::size_t max_pending_events = 1 << 16;
  std::size_t max_batch_events = 512;
  std::chrono::milliseconds poll_interval{10};  // how often the tier event log is read
  std::chrono::milliseconds max_backoff{5000};  // between attempts to reach the router
  // Device blocks (hash, copies) held before this publisher existed: a publisher created for a
  // router that appeared later starts from what the others already announced (RouterFanout
  // creates it on the engine thread, so no device event falls between the copy and the start).
  std::vector<std::pair<std::uint64_t, int>> initial_device_blocks;
};

struct KvEventPublisherStats {
  std::uint64_t events_sent = 0;     // deltas written to a stream
  std::uint64_t snapshots_sent = 0;
  std::uint64_t events_dropped = 0;  // deltas superseded by a snapshot (queue full)
  std::uint64_t streams_opened = 0;
  std::size_t pending_events = 0;
};

// Streams this worker's KV blocks, every tier, to the router over RouterControl.PublishKvEvents.
//
// Device events come from the BlockManager listener (OnDeviceEvent, engine thread), host and disk
// events from the TieredKvStore's event log. The publisher keeps the set of blocks it has
// announced per tier (its mirror) and numbers what it sends per incarnation, from 1, one by one.
// Every new stream (first connect, router restart, reconnect) starts with a KvSnapshot of the
// mirror; so does the next message after KvEventAck.resend_snapshot, RequestSnapshot() (the
// heartbeat's resend_kv_snapshot) or a queue overflow. A block held in several traffic classes of
// one tier is announced once, removed when the last copy goes.
class KvEventPublisher {
 public:
  // `store` may be null (device tier only); it must outlive the publisher.
  KvEventPublisher(std::shared_ptr<grpc::Channel> channel, KvEventPublisherOptions options,
                   kv::TieredKvStore* store);
  ~KvEventPublisher();
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // Cheap (a hash-map update and maybe a queue append); safe from any thread.
  void OnDeviceEvent(const engine::KvCacheEvent& event);
  void RequestSnapshot();
  // The seq of the last event written to the router (0 before the first); for heartbeats.
  std::uint64_t last_sent_seq() const { return last_sent_seq_.load(); }
  KvEventPublisherStats stats() const;

 private:
  struct Stream;
  using Mirror = absl::flat_hash_map<std::uint64_t, int>;  // hash -> copies (traffic classes)

  void Run();
  void IngestStoreEvents();
  void Apply(v1::KvTier tier, bool stored, std::uint64_t hash, std::uint64_t parent)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RebuildLowerTiers(const kv::StoreSnapshot& snapshot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A snapshot's content taken under the lock; turned into its message outside it.
  struct PendingSnapshot {
    std::uint64_t seq = 0;
    std::array<std::vector<std::uint64_t>, 4> tiers;  // indexed by v1::KvTier
    v1::KvEvent ToProto();
  };
  PendingSnapshot TakeSnapshot() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool SendPending(Stream& stream);  // false when the stream broke
  bool Wait(std::chrono::milliseconds d);  // false when stopping

  const KvEventPublisherOptions options_;
  kv::TieredKvStore* const store_;
  std::unique_ptr<v1::RouterControl::Stub> stub_;
  std::uint64_t store_seq_ = 0;  // pump thread only: last tier event ingested

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::array<Mirror, 4> mirror_ ABSL_GUARDED_BY(mu_);  // indexed by v1::KvTier
  bool streaming_ ABSL_GUARDED_BY(mu_) = false;
  bool snapshot_needed_ ABSL_GUARDED_BY(mu_) = true;
  std::deque<v1::KvEvent> outbox_ ABSL_GUARDED_BY(mu_);
  std::uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  KvEventPublisherStats stats_ ABSL_GUARDED_BY(mu_);
  std::atomic<std::uint64_t> last_sent_seq_{0};
  std::thread thread_;
};

}  // namespace tandem::worker
