#include <thread>

#include "absl/strings/str_cat.h"
#include "kv_handoff.h"

namespace tandem::worker {
namespace {

constexpr int kSpinPolls = 4;
constexpr std::chrono::microseconds kPollInterval{20};

}  // namespace

absl::StatusOr<KvSendResult> KvSender::Send(const v1::KvTarget& target,
                                            const std::vector<std::int32_t>& local_blocks,
                                            std::chrono::steady_clock::time_point deadline) {
  const std::uint64_t block_bytes = storage_.block_floats() * sizeof(float);
  if (target.block_bytes() != block_bytes) {
    return absl::FailedPreconditionError(
        absl::StrCat("decode blocks are ", target.block_bytes(), " bytes, ours are ", block_bytes,
                     ": the workers run different models or block sizes"));
  }
  if (target.blocks_size() != static_cast<int>(local_blocks.size())) {
    return absl::InvalidArgumentError(absl::StrCat("decode reserved ", target.blocks_size(),
                                                   " blocks for a prompt that fills ",
                                                   local_blocks.size()));
  }
  if (target.blocks_size() == 0 || target.blocks(0).rkey().empty() ||
      target.blocks(0).flag_rkey().empty()) {
    return absl::InvalidArgumentError("KV target carries no remote keys");
  }
  transport::GatedWrite write;
  write.peer_address = target.ucx_address();
  // The receiver registered its pool and its flag array once each; the base addresses only have
  // to bound the segments, so the lowest and highest block addresses describe the regions.
  transport::RegionDescriptor pool, flags;
  pool.remote_key = target.blocks(0).rkey();
  flags.remote_key = target.blocks(0).flag_rkey();
  std::uint64_t pool_lo = UINT64_MAX, pool_hi = 0, flag_lo = UINT64_MAX, flag_hi = 0;
  for (const auto& b : target.blocks()) {
    pool_lo = std::min(pool_lo, b.remote_addr());
    pool_hi = std::max(pool_hi, b.remote_addr() + block_bytes);
    flag_lo = std::min(flag_lo, b.flag_addr());
    flag_hi = std::max(flag_hi, b.flag_addr() + sizeof(std::uint64_t));
  }
  pool.base = pool_lo;
  pool.length = pool_hi - pool_lo;
  flags.base = flag_lo;
  flags.length = flag_hi - flag_lo;
  write.regions = {pool, flags};
  const std::uint64_t flag_value = HandoffFlagValue(target.handoff_id());
  for (int i = 0; i < target.blocks_size(); ++i) {
    const float* local =
        storage_.base + static_cast<std::int64_t>(local_blocks[i]) * storage_.block_floats();
    write.data.push_back({local, block_bytes, 0, target.blocks(i).remote_addr()});
    write.flags.push_back({&flag_value, sizeof(flag_value), 1, target.blocks(i).flag_addr()});
  }
  const auto start = std::chrono::steady_clock::now();
  auto id = agent_->StartGatedWrite(write);
  if (!id.ok()) return id.status();
  transport::TransferStatus status;
  for (int polls = 0;; ++polls) {
    status = agent_->Poll(*id);
    if (status.state != transport::TransferState::kInProgress) break;
    // The receiver progresses every ~50 us (TCP emulates the puts), so a transfer that is not done
    // at once takes tens of microseconds at least: spinning for it only takes the core from the
    // engine and from the other prefills' transfers.
    if (polls >= kSpinPolls) std::this_thread::sleep_for(kPollInterval);
    if (std::chrono::steady_clock::now() > deadline) {
      agent_->Release(*id);
      agent_->Disconnect(write.peer_address);
      return absl::DeadlineExceededError("KV transfer to the decode worker timed out");
    }
  }
  agent_->Release(*id);
  if (status.state == transport::TransferState::kFailed) {
    agent_->Disconnect(write.peer_address);
    return absl::UnavailableError(absl::StrCat("KV transfer failed: ", status.cause.message()));
  }
  return KvSendResult{status.bytes, std::chrono::duration_cast<std::chrono::microseconds>(
                                        std::chrono::steady_clock::now() - start)};
}

}  // namespace tandem::worker
