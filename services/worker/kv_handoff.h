#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <condition_variable>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "tandem/serving/engine_loop.h"
#include "tandem/transport/transfer_agent.h"
#include "tandem/v1/worker.pb.h"

namespace tandem::worker {

// The flag value that marks a block of handoff `handoff_id` as complete. Derived from the id on
// both sides, so a late write from an older, expired handoff into a reused block can never look
// like completion of the new one.
std::uint64_t HandoffFlagValue(const std::string& handoff_id);

struct KvReceiverStats {
  int active_handoffs = 0;
  int reserved_blocks = 0;     // held by open reservations (not committed, not abandoned)
  int quarantined_blocks = 0;  // of abandoned handoffs whose sender may still write them
  std::int64_t expired_total = 0;
  std::int64_t completed_total = 0;
};

// Decode side of a KV handoff. Registers the whole KV pool and one 8-byte flag per block with the
// transfer agent once; a reservation hands a prefill worker remote addresses of free blocks under
// a lease. Blocks are scheduled only after every flag shows the handoff's value (two-phase gate),
// and a reservation whose lease runs out is given back to the pool by a sweeper thread, so a
// prefill that dies mid-transfer strands nothing.
class KvReceiver {
 public:
  static absl::StatusOr<std::unique_ptr<KvReceiver>> Create(
      serving::EngineLoop* loop, transport::TransferAgent* agent, std::string worker_id);
  ~KvReceiver();

  absl::StatusOr<v1::KvTarget> Reserve(const std::string& request_id, int num_tokens,
                                       std::chrono::milliseconds lease);

  // Waits for every block's flag (bounded by the lease), then hands the blocks to the engine as
  // a running request whose first token prefill already sampled.
  absl::Status Commit(const std::string& handoff_id, const std::string& request_id,
                      std::vector<std::int32_t> prompt, std::int32_t first_token,
                      const engine::SamplingParams& params, kv::TrafficClass traffic_class,
                      serving::UpdateSink sink, int resumed_tokens = 0,
                      std::vector<engine::InputImage> images = {});

  // Gives a reservation back (prefill failed, request cancelled): the engine place at once, the
  // blocks once no write of the handoff can land in them any more. Unknown ids are ignored.
  //
  // Why not the blocks at once: the prefill worker may still be writing them (it learns of the
  // cancellation late, or never while a network partition lasts), and the one-sided writes would
  // land in whatever request the blocks were given to next: its KV silently overwritten, or its
  // flags set to the abandoned handoff's value, so that its Commit waits out the lease and fails.
  // So the blocks stay quarantined until every flag shows the abandoned handoff's value (the
  // sender wrote its last byte; flags go after a fence) or the lease ends (the sender's
  // transfer deadline is the lease, too).
  //
  // A Cancel can overtake the ReserveKv it cancels (the router cut the call in flight): an unknown
  // id is remembered for a while, and a reservation that arrives under it afterwards is refused,
  // instead of holding its blocks and a place until its lease runs out.
  void Abandon(const std::string& request_id);

  KvReceiverStats stats() const;

 private:
  struct Handoff {
    std::string request_id;
    std::vector<std::int32_t> blocks;
    std::uint64_t flag_value = 0;
    std::chrono::steady_clock::time_point deadline;
    bool committing = false;  // Commit owns it; the sweeper keeps off
    bool abandoned = false;   // quarantined: no request owns it, its blocks wait (see Abandon)
  };

  KvReceiver(serving::EngineLoop* loop, transport::TransferAgent* agent, std::string worker_id);
  void Sweep();
  // One-sided writes over TCP are emulated with active messages that land only while this side
  // progresses its UCX worker, so it does so continuously while any handoff is open.
  void ProgressWhileOpen();
  void ReleaseBlocks(std::vector<std::int32_t> blocks);
  bool AllFlagsSet(const Handoff& h) const;

  serving::EngineLoop* loop_;
  transport::TransferAgent* agent_;
  const std::string worker_id_;
  model::KvStorage storage_;
  std::vector<std::uint64_t> flags_;
  std::unique_ptr<transport::MemoryRegistration> pool_registration_;
  std::unique_ptr<transport::MemoryRegistration> flag_registration_;

  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  absl::flat_hash_map<std::string, Handoff> handoffs_;  // by handoff id
  absl::flat_hash_map<std::string, std::string> by_request_;  // request id -> handoff id
  // Ids cancelled before any reservation existed, until when a late ReserveKv is refused.
  absl::flat_hash_map<std::string, std::chrono::steady_clock::time_point> cancelled_early_;
  std::uint64_t next_handoff_ = 1;
  std::int64_t expired_total_ = 0;
  std::int64_t completed_total_ = 0;
  std::thread sweeper_;
  std::condition_variable open_cv_;  // wakes the progress thread when a handoff opens
  std::thread progress_;
};

struct KvSendResult {
  std::uint64_t bytes = 0;
  std::chrono::microseconds elapsed{0};
};

// Prefill side: writes the blocks holding a prompt's KV into a decode worker's reservation, data
// first and then the flags.
class KvSender {
 public:
  KvSender(transport::TransferAgent* agent, const model::KvStorage& storage)
      : agent_(agent), storage_(storage) {}

  absl::StatusOr<KvSendResult> Send(const v1::KvTarget& target,
                                    const std::vector<std::int32_t>& local_blocks,
                                    std::chrono::steady_clock::time_point deadline);

 private:
  transport::TransferAgent* agent_;
  model::KvStorage storage_;
};

}  // namespace tandem::worker
