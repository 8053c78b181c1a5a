#pragma once

#include <cstdint>
#include <span>

namespace tandem {

// Stable 64-bit hashing for identifiers that cross process boundaries (KV block hashes shared by
// router and workers, disk-tier keys). No per-process seed: the same input gives the same hash on
// every machine, build and restart. Not cryptographic.
std::uint64_t StableHash64(std::span<const std::uint8_t> bytes, std::uint64_t seed);

// Chained hash of one KV block: H(parent, tokens). parent is 0 for the first block of a sequence.
// Token ids are hashed as little-endian int32 so the value does not depend on host byte order.
std::uint64_t ChainedBlockHash(std::uint64_t parent, std::span<const std::int32_t> tokens);

}  // namespace tandem
