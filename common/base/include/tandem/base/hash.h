#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tandem {

// Stable 64-bit hashing for identifiers that cross process boundaries (KV block hashes shared by
// router and workers, disk-tier keys). No per-process seed: the same input gives the same hash on
// every machine, build and restart. Not cryptographic.
std::uint64_t StableHash64(std::span<const std::uint8_t> bytes, std::uint64_t seed);

// Chained hash of one KV block: H(parent, tokens). parent is 0 for the first block of a sequence.
// Token ids are hashed as little-endian int32 so the value does not depend on host byte order.
std::uint64_t ChainedBlockHash(std::uint64_t parent, std::span<const std::int32_t> tokens);

// The chained hashes of every full block of `tokens`, continuing the chain from `parent` (0 when
// `tokens` starts a sequence). A trailing partial block is not hashed.
std::vector<std::uint64_t> ChainedBlockHashes(std::span<const std::int32_t> tokens,
                                              std::size_t block_size, std::uint64_t parent = 0);

// The same chain written into `out` without allocating (for callers that hash on a latency path
// into a reused or stack buffer): the first min(full blocks, out.size()) hashes. Returns how many.
std::size_t ChainedBlockHashesInto(std::span<const std::int32_t> tokens, std::size_t block_size,
                                   std::uint64_t parent, std::span<std::uint64_t> out);

}  // namespace tandem
