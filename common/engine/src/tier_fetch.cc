// The engine's side of the KV tiers below the device pool: evicted blocks are copied down, and a
// request's prefix is fetched back up into pool blocks before admission prefills the rest. Any
// tier failure or shortage ends the reused prefix there; the rest is recomputed, never failed.
#include <algorithm>
#include <chrono>

#include "sequence.h"
#include "tandem/base/hash.h"
#include "tandem/engine/engine.h"

namespace tandem::engine {
namespace {

bool IsReady(std::future<kv::FetchResult>& f, std::chrono::microseconds wait) {
  return f.wait_for(wait) == std::future_status::ready;
}

}  // namespace

void Engine::SpillEvicted(const EvictedBlock& block) {
  const std::span<const std::uint8_t> bytes(
      reinterpret_cast<const std::uint8_t*>(block.data.data()), block.data.size_bytes());
  absl::StatusOr<kv::PutOutcome> put = config_.lower_tiers->Put(
      static_cast<kv::TrafficClass>(block.tag), block.block_hash, block.parent_hash, bytes);
  if (put.ok() && *put == kv::PutOutcome::kStored) {
    ++tier_stats_.spilled_blocks;
  } else if (put.ok() || !absl::IsAlreadyExists(put.status())) {
    ++tier_stats_.spill_dropped_blocks;  // host at its hard limit, or a failing store
  }
}

bool Engine::StartTierFetch(Sequence* seq, const BlockManager::PrefixMatch& match,
                            const std::vector<ScheduledChunk>& batch) {
  const int bs = blocks_->block_size();
  const int reusable = (static_cast<int>(seq->tokens.size()) - 1) / bs;
  const int device = static_cast<int>(match.blocks.size());
  if (device >= reusable) return false;
  const std::span<const std::int32_t> tokens(seq->tokens);
  const std::vector<std::uint64_t> chain = ChainedBlockHashes(
      tokens.subspan(static_cast<std::size_t>(device) * bs,
                     static_cast<std::size_t>(reusable - device) * bs),
      static_cast<std::size_t>(bs), device == 0 ? seq->table.root : match.hashes.back());
  kv::TieredKvStore& lower = *config_.lower_tiers;
  absl::StatusOr<kv::LookupResult> found = lower.Lookup(seq->traffic_class, chain);
  if (!found.ok() || found->available_prefix == 0) return false;

  // Fetch targets come out of the free pool like the blocks a prefill would take; what does not
  // fit now is recomputed (the running batch keeps its next-step reserve).
  const int reserve = running_.empty() ? 0 : BlocksReservedForNextStep(batch) + 1;
  const int room = blocks_->num_free_blocks() - match.num_evictable - reserve;
  const int n = std::min(static_cast<int>(found->available_prefix), room);
  if (n <= 0) {
    tier_stats_.fetch_shortfall_blocks += static_cast<std::int64_t>(found->available_prefix);
    return false;
  }
  tier_stats_.fetch_shortfall_blocks += static_cast<std::int64_t>(found->available_prefix) - n;
  blocks_->AcquirePrefix(match, &seq->table);
  if (!blocks_->EnsureCapacity(&seq->table, (device + n) * bs).ok()) {
    blocks_->Release(&seq->table);  // cannot happen: `room` counted these blocks
    return false;
  }
  std::vector<std::span<std::uint8_t>> buffers;
  buffers.reserve(n);
  for (int i = 0; i < n; ++i) {
    const std::span<float> data = blocks_->BlockData(seq->table.blocks[device + i]);
    buffers.emplace_back(reinterpret_cast<std::uint8_t*>(data.data()), data.size_bytes());
  }
  auto fetch = std::make_unique<TierFetch>();
  fetch->device_blocks = device;
  fetch->tiers.assign(found->tiers.begin(), found->tiers.begin() + n);
  fetch->started = std::chrono::steady_clock::now();
  fetch->done = lower.Fetch(seq->traffic_class, std::span<const std::uint64_t>(chain).first(n),
                            buffers);
  seq->fetch = std::move(fetch);
  waiting_.pop_front();  // `seq` is the front: TryAdmit is only called on it
  fetching_.push_back(seq);
  // Host blocks are copied synchronously: then the sequence is admitted in this same step.
  if (IsReady(seq->fetch->done, std::chrono::microseconds(0))) CompleteTierFetch(seq);
  return true;
}

void Engine::CompleteTierFetches(bool wait_for_one) {
  if (fetching_.empty()) return;
  // Nothing else to run: give the fetch threads a moment instead of spinning on Step().
  if (wait_for_one) IsReady(fetching_.front()->fetch->done, std::chrono::milliseconds(1));
  const std::vector<Sequence*> fetching = fetching_;
  for (Sequence* seq : fetching) {
    if (IsReady(seq->fetch->done, std::chrono::microseconds(0))) CompleteTierFetch(seq);
  }
}

void Engine::CompleteTierFetch(Sequence* seq) {
  TierFetch& fetch = *seq->fetch;
  const kv::FetchResult result = fetch.done.get();
  const int ready = static_cast<int>(std::min(result.blocks_ready, fetch.tiers.size()));
  tier_stats_.fetch_shortfall_blocks += static_cast<std::int64_t>(fetch.tiers.size()) - ready;
  TierFetchReport report;
  report.host_blocks = static_cast<int>(
      std::count(fetch.tiers.begin(), fetch.tiers.begin() + ready, kv::KvTier::kHost));
  report.disk_blocks = ready - report.host_blocks;
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - fetch.started).count();
  seq->fetched_host_blocks = report.host_blocks;
  seq->fetched_disk_blocks = report.disk_blocks;
  // The fetched blocks join the prefix cache like computed ones, and the sequence goes back to
  // the front of the queue, where admission reuses them as a device prefix. Released rather
  // than kept so admission's accounting (and preemption) see one kind of prefix only.
  blocks_->CommitComputedBlocks(seq->tokens, (fetch.device_blocks + ready) * blocks_->block_size(),
                                &seq->table);
  blocks_->Release(&seq->table);
  seq->fetch.reset();
  fetching_.erase(std::find(fetching_.begin(), fetching_.end(), seq));
  waiting_.push_front(seq);
  if (fetch_observer_ && ready > 0) fetch_observer_(report);
}

void Engine::CountPrefixReuse(const Sequence& seq, int device_blocks) {
  const int reusable = (static_cast<int>(seq.tokens.size()) - 1) / blocks_->block_size();
  const int host = std::min(seq.fetched_host_blocks, device_blocks);
  const int disk = std::min(seq.fetched_disk_blocks, device_blocks - host);
  tier_stats_.host_hit_blocks += host;
  tier_stats_.disk_hit_blocks += disk;
  tier_stats_.device_hit_blocks += device_blocks - host - disk;
  tier_stats_.miss_blocks += std::max(0, reusable - device_blocks);
}

}  // namespace tandem::engine
