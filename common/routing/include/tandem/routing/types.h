#pragma once

#include <cstdint>

namespace tandem::routing {

// Chained hash of one KV block (tandem::ChainedBlockHash): equal hashes mean equal prefixes, so a
// request's leading run of known hashes is exactly its cached prefix.
using BlockHash = std::uint64_t;

// Names tandem::ChainedBlockHash over token ids, as workers announce it at registration: a router
// and a worker that disagree would never match a prefix, so the router refuses the worker.
inline constexpr char kKvHashScheme[] = "chained-fnv1a-splitmix64/v1";

// Dense worker index chosen by the caller (the router maps its string worker ids onto slots).
// Slots are bounded so per-block ownership fits one machine word per tier.
using WorkerSlot = int;
inline constexpr int kMaxWorkers = 64;
inline constexpr WorkerSlot kNoWorker = -1;

// Bit w set = worker slot w.
using WorkerMask = std::uint64_t;
inline constexpr WorkerMask SlotBit(WorkerSlot w) { return WorkerMask{1} << w; }

enum class Tier : int { kDevice = 0, kHost = 1, kDisk = 2 };
inline constexpr int kNumTiers = 3;

enum class Role { kPrefill, kDecode, kCombined };

// How much of a cached block's prefill a hit in each tier saves: loading from host or disk costs
// part of what recomputing would (Dynamo credits device 1.0, host 0.75, then disk lower).
struct TierCredits {
  double device = 1.0;
  double host = 0.75;
  double disk = 0.5;
};

}  // namespace tandem::routing
