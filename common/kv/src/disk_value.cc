#include "disk_value.h"

#include <lz4.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "tandem/kv/crc32c.h"

namespace tandem::kv::disk_value {
namespace {

template <typename T>
void PutLe(std::string& out, std::size_t offset, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    out[offset + i] = static_cast<char>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xFF);
  }
}

template <typename T>
T GetLe(const char* p) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    v |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(p[i])) << (8 * i);
  }
  return static_cast<T>(v);
}

std::span<const std::uint8_t> Bytes(const char* p, std::size_t n) {
  return {reinterpret_cast<const std::uint8_t*>(p), n};
}

std::uint32_t Checksum(const std::string& key, const char* value, std::size_t size) {
  std::uint32_t crc = Crc32c(Bytes(key.data(), key.size()));
  crc = Crc32cExtend(crc, Bytes(value, 4));
  return Crc32cExtend(crc, Bytes(value + 8, size - 8));
}

// Compressing a whole incompressible block (float KV usually is) costs as much as compressing
// a compressible one; a 4 KiB sample decides first.
bool SamplePays(std::span<const std::uint8_t> block) {
  constexpr std::size_t kSample = 4096;
  if (block.size() <= 2 * kSample) return true;
  char out[LZ4_COMPRESSBOUND(kSample)];
  const int n = LZ4_compress_default(reinterpret_cast<const char*>(block.data()), out, kSample,
                                     sizeof(out));
  return n > 0 && static_cast<std::size_t>(n) <= kSample - kSample / 8;
}

}  // namespace

std::string EncodeKey(const BlockKey& key) {
  std::string out(kKeySize, '\0');
  out[0] = static_cast<char>(key.cls);
  for (int i = 0; i < 8; ++i) out[1 + i] = static_cast<char>((key.hash >> (56 - 8 * i)) & 0xFF);
  return out;
}

absl::StatusOr<BlockKey> DecodeKey(rocksdb::Slice key) {
  if (key.size() != kKeySize) {
    return absl::DataLossError(absl::StrCat("disk key has ", key.size(), " bytes, want 9"));
  }
  BlockKey out;
  out.cls = static_cast<TrafficClass>(static_cast<std::uint8_t>(key[0]));
  if (!ValidateTrafficClass(out.cls).ok()) {
    return absl::DataLossError(absl::StrCat("disk key has unknown traffic class ",
                                            static_cast<int>(static_cast<std::uint8_t>(key[0]))));
  }
  for (int i = 0; i < 8; ++i) {
    out.hash = (out.hash << 8) | static_cast<std::uint8_t>(key[1 + i]);
  }
  return out;
}

std::string EncodeValue(const BlockKey& key, const Header& header,
                        std::span<const std::uint8_t> block, DiskCompression compression,
                        bool* compressed) {
  std::string value;
  *compressed = false;
  if (compression == DiskCompression::kLz4IfItPays && block.size() <= LZ4_MAX_INPUT_SIZE &&
      SamplePays(block)) {
    const int bound = LZ4_compressBound(static_cast<int>(block.size()));
    value.resize(kHeaderSize + static_cast<std::size_t>(bound));
    const int n = LZ4_compress_default(reinterpret_cast<const char*>(block.data()),
                                       value.data() + kHeaderSize,
                                       static_cast<int>(block.size()), bound);
    // Below 1/8 saved, the decompression on every read costs more than the bytes saved.
    if (n > 0 && static_cast<std::size_t>(n) <= block.size() - block.size() / 8) {
      value.resize(kHeaderSize + static_cast<std::size_t>(n));
      *compressed = true;
    }
  }
  if (!*compressed) {
    value.resize(kHeaderSize + block.size());
    std::memcpy(value.data() + kHeaderSize, block.data(), block.size());
  }
  value[0] = static_cast<char>(kFormatVersion);
  value[1] = static_cast<char>(*compressed ? 1 : 0);
  PutLe<std::uint16_t>(value, 2, 0);
  PutLe<std::uint32_t>(value, 8, static_cast<std::uint32_t>(block.size()));
  PutLe<std::uint32_t>(value, 12, static_cast<std::uint32_t>(value.size() - kHeaderSize));
  PutLe<std::int64_t>(value, 16, header.expiry_unix_ms);
  PutLe<std::uint64_t>(value, 24, header.parent_hash);
  PutLe<std::int64_t>(value, 32, header.written_unix_ms);
  PutLe<std::uint32_t>(value, 4, Checksum(EncodeKey(key), value.data(), value.size()));
  return value;
}

absl::StatusOr<Header> ParseHeader(rocksdb::Slice value) {
  if (value.size() < kHeaderSize) {
    return absl::DataLossError(absl::StrCat("disk value has ", value.size(),
                                            " bytes, shorter than the 40-byte header"));
  }
  const char* p = value.data();
  if (static_cast<std::uint8_t>(p[0]) != kFormatVersion) {
    return absl::DataLossError(absl::StrCat("disk value format version ",
                                            static_cast<int>(static_cast<std::uint8_t>(p[0])),
                                            ", this build reads version 1"));
  }
  const auto flags = static_cast<std::uint8_t>(p[1]);
  if ((flags & ~1u) != 0 || GetLe<std::uint16_t>(p + 2) != 0) {
    return absl::DataLossError("disk value header has unknown flags");
  }
  Header header;
  header.lz4 = (flags & 1u) != 0;
  header.uncompressed_len = GetLe<std::uint32_t>(p + 8);
  header.payload_len = GetLe<std::uint32_t>(p + 12);
  header.expiry_unix_ms = GetLe<std::int64_t>(p + 16);
  header.parent_hash = GetLe<std::uint64_t>(p + 24);
  header.written_unix_ms = GetLe<std::int64_t>(p + 32);
  if (header.payload_len != value.size() - kHeaderSize) {
    return absl::DataLossError(absl::StrCat("disk value payload length field ", header.payload_len,
                                            " but ", value.size() - kHeaderSize,
                                            " payload bytes stored"));
  }
  if (header.uncompressed_len == 0 ||
      (!header.lz4 && header.uncompressed_len != header.payload_len)) {
    return absl::DataLossError("disk value uncompressed length disagrees with its payload");
  }
  return header;
}

absl::Status DecodeBlock(const BlockKey& key, rocksdb::Slice value, const Header& header,
                         std::span<std::uint8_t> out) {
  if (out.size() != header.uncompressed_len) {
    return absl::InvalidArgumentError(absl::StrCat("buffer has ", out.size(),
                                                   " bytes, block has ", header.uncompressed_len));
  }
  const std::uint32_t stored = GetLe<std::uint32_t>(value.data() + 4);
  if (Checksum(EncodeKey(key), value.data(), value.size()) != stored) {
    return absl::DataLossError("disk value checksum mismatch");
  }
  const char* payload = value.data() + kHeaderSize;
  if (!header.lz4) {
    std::memcpy(out.data(), payload, out.size());
    return absl::OkStatus();
  }
  const int n = LZ4_decompress_safe(payload, reinterpret_cast<char*>(out.data()),
                                    static_cast<int>(header.payload_len),
                                    static_cast<int>(out.size()));
  if (n < 0 || static_cast<std::size_t>(n) != out.size()) {
    return absl::DataLossError("disk value LZ4 payload does not decompress to its length");
  }
  return absl::OkStatus();
}

}  // namespace tandem::kv::disk_value
