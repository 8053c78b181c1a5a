#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rocksdb/slice.h"
#include "tandem/kv/disk_tier.h"
#include "tandem/kv/types.h"

namespace tandem::kv::disk_value {

// Value layout, little-endian, version 1:
//   [0]  u8  format version
//   [1]  u8  flags (bit 0: payload is LZ4)
//   [2]  u16 reserved, 0
//   [4]  u32 CRC-32C over the key, value[0..4) and value[8..end)
//   [8]  u32 uncompressed block length
//   [12] u32 payload length (catches truncation before the checksum is even computed)
//   [16] i64 expiry, unix ms
//   [24] u64 parent hash
//   [32] i64 write time, unix ms (eviction order after a restart)
//   [40] payload
inline constexpr std::size_t kHeaderSize = 40;
inline constexpr std::uint8_t kFormatVersion = 1;
inline constexpr std::size_t kKeySize = 9;
inline constexpr std::uint64_t kMaxBlockBytes = 0xFFFFFFFFull;

struct Header {
  bool lz4 = false;
  std::uint32_t uncompressed_len = 0;
  std::uint32_t payload_len = 0;
  std::int64_t expiry_unix_ms = 0;
  std::uint64_t parent_hash = 0;
  std::int64_t written_unix_ms = 0;
};

std::string EncodeKey(const BlockKey& key);
absl::StatusOr<BlockKey> DecodeKey(rocksdb::Slice key);

// Compresses when the mode allows and it pays; sets *compressed accordingly.
std::string EncodeValue(const BlockKey& key, const Header& header,
                        std::span<const std::uint8_t> block, DiskCompression compression,
                        bool* compressed);

// Format checks only (cheap; used to rebuild the index on open).
absl::StatusOr<Header> ParseHeader(rocksdb::Slice value);

// Verifies the checksum and writes the block into `out` (must be uncompressed_len bytes).
absl::Status DecodeBlock(const BlockKey& key, rocksdb::Slice value, const Header& header,
                         std::span<std::uint8_t> out);

}  // namespace tandem::kv::disk_value
