#pragma once

#include <cstdint>
#include <vector>

#include "tandem/routing/types.h"

namespace tandem::routing {

// One KV event from a worker, free of the wire format (the router converts tandem.v1.KvEvent).
// Sequence numbers are per worker incarnation and increase by exactly one.
struct KvEvent {
  enum class Kind { kStored, kRemoved, kSnapshot };

  struct TierBlocks {
    Tier tier = Tier::kDevice;
    std::vector<BlockHash> block_hashes;
  };

  std::uint64_t seq = 0;
  Kind kind = Kind::kStored;
  // kStored / kRemoved.
  Tier tier = Tier::kDevice;
  BlockHash parent_hash = 0;  // kStored: the block before the first one, 0 at a sequence start
  std::vector<BlockHash> block_hashes;
  // kSnapshot: everything the worker holds, replacing what the index knew.
  std::vector<TierBlocks> snapshot;
};

// What applying an event did; the router forwards kGap as "resend snapshot" to the worker.
enum class EventOutcome {
  kApplied,
  kDuplicate,     // seq already applied (a retransmission); ignored
  kGap,           // seq skipped ahead: the worker is stale until a snapshot arrives
  kIgnoredStale,  // the worker is stale and this is not a snapshot
};

}  // namespace tandem::routing
