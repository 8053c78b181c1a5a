#include "tandem/base/hash.h"

#include <algorithm>
#include <vector>

namespace tandem {
namespace {

// 64-bit FNV-1a followed by a SplitMix64 finaliser: FNV alone mixes the high bits poorly, and
// block hashes are bucketed by their low bits in the router's index.
constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
constexpr std::uint64_t kFnvPrime = 0x100000001b3ULL;
// Added to a block's parent hash to seed it, so that equal token blocks under different prefixes
// differ (and a first block, parent 0, does not start from Finalise(0) == 0).
constexpr std::uint64_t kParentSeedOffset = 0x9e3779b97f4a7c15ULL;

std::uint64_t Finalise(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t FnvStart(std::uint64_t seed) { return kFnvOffset ^ Finalise(seed); }

std::uint64_t FnvByte(std::uint64_t h, std::uint8_t b) { return (h ^ b) * kFnvPrime; }

// FNV over a token's four little-endian bytes. An FNV step over a zero byte is a bare
// multiplication by the prime, so a run of them folds into one multiplication by a power of it:
// token ids are far below 2^24 (2^16 for most vocabularies), and the multiplications are the
// serial chain that bounds hashing speed. Same value as four FnvByte steps.
std::uint64_t FnvToken(std::uint64_t h, std::uint32_t u) {
  constexpr std::uint64_t kFnvPrime2 = kFnvPrime * kFnvPrime;
  constexpr std::uint64_t kFnvPrime3 = kFnvPrime2 * kFnvPrime;
  h = FnvByte(h, static_cast<std::uint8_t>(u));
  if ((u >> 16) == 0) return (h ^ (u >> 8)) * kFnvPrime3;
  h = FnvByte(h, static_cast<std::uint8_t>(u >> 8));
  if ((u >> 24) == 0) return (h ^ (u >> 16)) * kFnvPrime2;
  h = FnvByte(h, static_cast<std::uint8_t>(u >> 16));
  return FnvByte(h, static_cast<std::uint8_t>(u >> 24));
}

std::uint64_t FnvFinish(std::uint64_t h, std::size_t length) { return Finalise(h ^ length); }

}  // namespace

std::uint64_t StableHash64(std::span<const std::uint8_t> bytes, std::uint64_t seed) {
  std::uint64_t h = FnvStart(seed);
  for (std::uint8_t b : bytes) h = FnvByte(h, b);
  return FnvFinish(h, bytes.size());
}

std::uint64_t ChainedBlockHash(std::uint64_t parent, std::span<const std::int32_t> tokens) {
  // StableHash64 of the tokens' little-endian bytes, streamed: the router hashes every prompt on
  // its decision path, so no byte buffer per block.
  std::uint64_t h = FnvStart(parent + kParentSeedOffset);
  for (std::int32_t t : tokens) h = FnvToken(h, static_cast<std::uint32_t>(t));
  return FnvFinish(h, tokens.size() * sizeof(std::uint32_t));
}

std::size_t ChainedBlockHashesInto(std::span<const std::int32_t> tokens, std::size_t block_size,
                                   std::uint64_t parent, std::span<std::uint64_t> out) {
  if (block_size == 0) return 0;
  const std::size_t n = std::min(tokens.size() / block_size, out.size());
  for (std::size_t i = 0; i < n; ++i) {
    parent = ChainedBlockHash(parent, tokens.subspan(i * block_size, block_size));
    out[i] = parent;
  }
  return n;
}

std::vector<std::uint64_t> ChainedBlockHashes(std::span<const std::int32_t> tokens,
                                              std::size_t block_size, std::uint64_t parent) {
  std::vector<std::uint64_t> chain(block_size == 0 ? 0 : tokens.size() / block_size);
  ChainedBlockHashesInto(tokens, block_size, parent, chain);
  return chain;
}

}  // namespace tandem
