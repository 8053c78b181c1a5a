#include "tandem/base/hash.h"

#include <vector>

namespace tandem {
namespace {

// 64-bit FNV-1a followed by a SplitMix64 finaliser: FNV alone mixes the high bits poorly, and
// block hashes are bucketed by their low bits in the router's index.
constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
constexpr std::uint64_t kFnvPrime = 0x100000001b3ULL;

std::uint64_t Finalise(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

std::uint64_t StableHash64(std::span<const std::uint8_t> bytes, std::uint64_t seed) {
  std::uint64_t h = kFnvOffset ^ Finalise(seed);
  for (std::uint8_t b : bytes) {
    h ^= b;
    h *= kFnvPrime;
  }
  return Finalise(h ^ bytes.size());
}

std::uint64_t ChainedBlockHash(std::uint64_t parent, std::span<const std::int32_t> tokens) {
  std::vector<std::uint8_t> buf;
  buf.reserve(tokens.size() * 4);
  for (std::int32_t t : tokens) {
    const auto u = static_cast<std::uint32_t>(t);
    buf.push_back(static_cast<std::uint8_t>(u));
    buf.push_back(static_cast<std::uint8_t>(u >> 8));
    buf.push_back(static_cast<std::uint8_t>(u >> 16));
    buf.push_back(static_cast<std::uint8_t>(u >> 24));
  }
  // Seed with the parent so that equal token blocks under different prefixes differ.
  return StableHash64(buf, parent + 0x9e3779b97f4a7c15ULL);
}

std::vector<std::uint64_t> ChainedBlockHashes(std::span<const std::int32_t> tokens,
                                              std::size_t block_size, std::uint64_t parent) {
  std::vector<std::uint64_t> chain;
  if (block_size == 0) return chain;
  chain.reserve(tokens.size() / block_size);
  for (std::size_t start = 0; start + block_size <= tokens.size(); start += block_size) {
    parent = ChainedBlockHash(parent, tokens.subspan(start, block_size));
    chain.push_back(parent);
  }
  return chain;
}

}  // namespace tandem
