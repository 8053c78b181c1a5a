#pragma once

#include <cstdint>
#include <span>

namespace tandem::kv {

// CRC-32C (Castagnoli), as used by iSCSI/ext4/RocksDB. `crc` chains calls: pass the previous
// result to extend over more bytes; start from 0.
std::uint32_t Crc32cExtend(std::uint32_t crc, std::span<const std::uint8_t> bytes);
inline std::uint32_t Crc32c(std::span<const std::uint8_t> bytes) { return Crc32cExtend(0, bytes); }

}  // namespace tandem::kv
