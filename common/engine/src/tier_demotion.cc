// Device-tier watermark demotion: above the low watermark, cold cached blocks are copied to host
// memory a few at a time between steps, so the eviction that later reclaims them copies nothing
// and eviction never turns into a burst of copies when the pool fills.
#include <cstdint>
#include <limits>
#include <span>

#include "absl/status/status.h"
#include "tandem/engine/engine.h"

namespace tandem::engine {

void Engine::DemoteColdDeviceBlocks() {
  if (config_.lower_tiers == nullptr || config_.device_low_watermark >= 1.0) return;
  if (blocks_->used_fraction() <= config_.device_low_watermark) return;
  blocks_->DemoteColdest(std::numeric_limits<int>::max(),
                         [this](const EvictedBlock& block) { return DemoteBlock(block); });
}

bool Engine::DemoteBlock(const EvictedBlock& block) {
  // Tokens first: a copy the bucket does not allow waits for a later step.
  if (!demotion_bucket_.TryTake(block.data.size_bytes(), clock_->NowUnixMs())) return false;
  const std::span<const std::uint8_t> bytes(
      reinterpret_cast<const std::uint8_t*>(block.data.data()), block.data.size_bytes());
  absl::StatusOr<kv::PutOutcome> put = config_.lower_tiers->Put(
      static_cast<kv::TrafficClass>(block.tag), block.block_hash, block.parent_hash, bytes);
  if (!put.ok()) return absl::IsAlreadyExists(put.status());  // already in host memory
  if (*put != kv::PutOutcome::kStored) return false;  // host full: eviction tries again
  ++tier_stats_.demoted_blocks;
  return true;
}

}  // namespace tandem::engine
