#include "tandem/kv/disk_tier.h"

#include <algorithm>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kv_test_util.h"
#include "rocksdb/db.h"

namespace tandem::kv {
namespace {

using testing::kStartMs;
using testing::RandomBlock;
using testing::RepetitiveBlock;
using testing::ScopedTempDir;

constexpr std::int64_t kDayMs = 24 * 3600 * 1000LL;

std::string RawKey(TrafficClass cls, std::uint64_t hash) {
  std::string key(9, '\0');
  key[0] = static_cast<char>(cls);
  for (int i = 0; i < 8; ++i) key[1 + i] = static_cast<char>((hash >> (56 - 8 * i)) & 0xFF);
  return key;
}

class DiskTierTest : public ::testing::Test {
 protected:
  std::unique_ptr<DiskTier> Open(std::uint64_t capacity = 1 << 20,
                                 DiskCompression compression = DiskCompression::kLz4IfItPays) {
    DiskTierOptions options;
    options.path = dir_.Sub("db");
    options.capacity_bytes = capacity;
    options.compression = compression;
    auto tier = DiskTier::Open(options, &clock_, &events_);
    EXPECT_TRUE(tier.ok()) << tier.status();
    return tier.ok() ? std::move(*tier) : nullptr;
  }

  // Rewrites one stored value through RocksDB itself, as bit rot on the device would.
  void CorruptRaw(const std::string& key, std::size_t offset_from_end) {
    rocksdb::DB* raw = nullptr;
    rocksdb::Options options;
    ASSERT_TRUE(rocksdb::DB::Open(options, dir_.Sub("db"), &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    std::string value;
    ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), key, &value).ok());
    ASSERT_GT(value.size(), offset_from_end);
    value[value.size() - 1 - offset_from_end] ^= 0x01;
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), key, value).ok());
    ASSERT_TRUE(db->Close().ok());
  }

  ScopedTempDir dir_;
  FakeClock clock_{kStartMs};
  EventLog events_{1 << 12};
};

TEST_F(DiskTierTest, RoundTripsIncompressibleAndCompressibleBlocks) {
  auto tier = Open();
  const BlockKey a{TrafficClass::kChat, 0xA1};
  const BlockKey b{TrafficClass::kAgent, 0xB2};
  const auto random = RandomBlock(1, 8192);
  const auto repetitive = RepetitiveBlock(2, 8192);
  ASSERT_TRUE(tier->Put(a, 0, kStartMs + kDayMs, random).ok());
  ASSERT_TRUE(tier->Put(b, 0xA1, kStartMs + kDayMs, repetitive).ok());
  EXPECT_EQ(*tier->Get(a), random);
  EXPECT_EQ(*tier->Get(b), repetitive);
  const DiskTierStats stats = tier->stats();
  EXPECT_EQ(stats.compressed_blocks, 1u);  // only the repetitive block pays
  EXPECT_EQ(stats.blocks, 2u);
  EXPECT_LT(stats.bytes, 8192u + 8192u);  // the compressed one is stored smaller
  EXPECT_EQ(stats.hits, 2u);
  // Same hash, other class: a different block.
  EXPECT_EQ(tier->Get({TrafficClass::kAgent, 0xA1}).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(DiskTierTest, RejectsBadInputWithoutState) {
  auto tier = Open();
  const BlockKey key{TrafficClass::kChat, 1};
  EXPECT_EQ(tier->Put(key, 0, kStartMs + kDayMs, {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tier->Put({static_cast<TrafficClass>(9), 1}, 0, kStartMs + kDayMs, RandomBlock(1, 64))
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tier->Put(key, 0, kStartMs, RandomBlock(1, 64)).code(),
            absl::StatusCode::kInvalidArgument);  // already expired
  EXPECT_EQ(tier->stats().blocks, 0u);
  EXPECT_EQ(events_.last_seq(), 0u);
  ASSERT_TRUE(tier->Put(key, 0, kStartMs + kDayMs, RandomBlock(1, 64)).ok());
  EXPECT_EQ(tier->Put(key, 0, kStartMs + kDayMs, RandomBlock(2, 64)).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(*tier->Get(key), RandomBlock(1, 64));  // the first write stands
  std::vector<std::uint8_t> wrong_size(63);
  EXPECT_EQ(tier->Read(key, wrong_size).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(tier->Contains(key));
}

TEST_F(DiskTierTest, SurvivesReopenAndReannouncesWhatItHolds) {
  std::vector<BlockRecord> before;
  {
    auto tier = Open();
    for (std::uint64_t h = 1; h <= 5; ++h) {
      ASSERT_TRUE(tier->Put({TrafficClass::kChat, h}, h - 1, kStartMs + kDayMs,
                            RandomBlock(h, 1000 + h))
                      .ok());
    }
    ASSERT_TRUE(tier->Put({TrafficClass::kAgent, 42}, 0, kStartMs + kDayMs, RandomBlock(42, 500))
                    .ok());
    before = tier->Snapshot();
  }
  EventLog fresh(1 << 12);
  DiskTierOptions options;
  options.path = dir_.Sub("db");
  options.capacity_bytes = 1 << 20;
  auto reopened = DiskTier::Open(options, &clock_, &fresh);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  auto after = (*reopened)->Snapshot();
  auto by_key = [](const BlockRecord& a, const BlockRecord& b) {
    return std::tie(a.key.cls, a.key.hash) < std::tie(b.key.cls, b.key.hash);
  };
  std::sort(before.begin(), before.end(), by_key);
  std::sort(after.begin(), after.end(), by_key);
  ASSERT_EQ(after.size(), 6u);
  for (std::size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].key, before[i].key);
    EXPECT_EQ(after[i].parent_hash, before[i].parent_hash);
    EXPECT_EQ(after[i].size_bytes, before[i].size_bytes);
    EXPECT_EQ(after[i].expiry_unix_ms, before[i].expiry_unix_ms);
  }
  for (std::uint64_t h = 1; h <= 5; ++h) {
    EXPECT_EQ(*(*reopened)->Get({TrafficClass::kChat, h}), RandomBlock(h, 1000 + h));
  }
  auto announced = fresh.ReadAfter(0, 100);
  ASSERT_TRUE(announced.ok());
  ASSERT_EQ(announced->size(), 6u);
  for (const KvEvent& e : *announced) {
    EXPECT_EQ(e.tier, KvTier::kDisk);
    EXPECT_EQ(e.kind, KvEvent::Kind::kStored);
  }
}

TEST_F(DiskTierTest, CorruptPayloadIsAMissAndDeleted) {
  const BlockKey key{TrafficClass::kChat, 0xDEADBEEF};
  {
    auto tier = Open();
    ASSERT_TRUE(tier->Put(key, 7, kStartMs + kDayMs, RandomBlock(3, 4096)).ok());
    ASSERT_TRUE(tier->Put({TrafficClass::kChat, 5}, 0, kStartMs + kDayMs, RandomBlock(5, 4096))
                    .ok());
  }
  CorruptRaw(RawKey(key.cls, key.hash), /*offset_from_end=*/100);
  auto tier = Open();
  ASSERT_TRUE(tier->Contains(key));  // the header still parses; only the checksum can tell
  std::vector<std::uint8_t> out(4096, 0);
  EXPECT_EQ(tier->Read(key, out).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(out, std::vector<std::uint8_t>(4096, 0)) << "no partial bytes may be trusted";
  EXPECT_FALSE(tier->Contains(key));
  EXPECT_EQ(tier->stats().corruptions, 1u);
  EXPECT_EQ(*tier->Get({TrafficClass::kChat, 5}), RandomBlock(5, 4096));
  // Deleted for good, not just hidden.
  tier.reset();
  auto again = Open();
  EXPECT_FALSE(again->Contains(key));
}

TEST_F(DiskTierTest, CorruptHeaderIsDroppedOnOpen) {
  const BlockKey key{TrafficClass::kAgent, 77};
  {
    auto tier = Open();
    ASSERT_TRUE(tier->Put(key, 0, kStartMs + kDayMs, RandomBlock(77, 256)).ok());
  }
  CorruptRaw(RawKey(key.cls, key.hash), /*offset_from_end=*/256 + 40 - 1);  // version byte
  auto tier = Open();
  EXPECT_FALSE(tier->Contains(key));
  EXPECT_EQ(tier->stats().corruptions, 1u);
}

TEST_F(DiskTierTest, ExpiredBlocksAreNeverServedAndAreDeleted) {
  auto tier = Open();
  const BlockKey soon{TrafficClass::kAgent, 1};
  const BlockKey later{TrafficClass::kAgent, 2};
  const BlockKey swept{TrafficClass::kChat, 3};
  ASSERT_TRUE(tier->Put(soon, 0, kStartMs + 1000, RandomBlock(1, 128)).ok());
  ASSERT_TRUE(tier->Put(later, 0, kStartMs + 5000, RandomBlock(2, 128)).ok());
  ASSERT_TRUE(tier->Put(swept, 0, kStartMs + 1000, RandomBlock(3, 128)).ok());
  clock_.Advance(1000);
  EXPECT_FALSE(tier->Contains(soon));
  EXPECT_EQ(tier->Get(soon).status().code(), absl::StatusCode::kNotFound);
  std::vector<std::uint8_t> out(128);
  EXPECT_EQ(tier->Read(soon, out).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*tier->Get(later), RandomBlock(2, 128));
  auto n = tier->SweepExpired();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1u);  // `swept`; `soon` was already deleted by the read
  EXPECT_EQ(tier->stats().expirations, 2u);
  EXPECT_EQ(tier->stats().blocks, 1u);
  // Expired entries do not come back after a restart either.
  tier.reset();
  clock_.Advance(4000);
  auto reopened = Open();
  EXPECT_EQ(reopened->stats().blocks, 0u);
}

TEST_F(DiskTierTest, CapacityEvictsLeastRecentlyUsed) {
  // Each random 1000-byte block is stored as 1040 bytes; room for three.
  auto tier = Open(/*capacity=*/3 * 1040, DiskCompression::kNone);
  for (std::uint64_t h = 1; h <= 3; ++h) {
    ASSERT_TRUE(tier->Put({TrafficClass::kChat, h}, 0, kStartMs + kDayMs, RandomBlock(h, 1000))
                    .ok());
  }
  ASSERT_TRUE(tier->Get({TrafficClass::kChat, 1}).ok());  // 2 is now the coldest
  ASSERT_TRUE(tier->Put({TrafficClass::kChat, 4}, 0, kStartMs + kDayMs, RandomBlock(4, 1000))
                  .ok());
  EXPECT_TRUE(tier->Contains({TrafficClass::kChat, 1}));
  EXPECT_FALSE(tier->Contains({TrafficClass::kChat, 2}));
  EXPECT_TRUE(tier->Contains({TrafficClass::kChat, 3}));
  EXPECT_TRUE(tier->Contains({TrafficClass::kChat, 4}));
  EXPECT_EQ(tier->stats().evictions, 1u);
  EXPECT_LE(tier->used_bytes(), tier->capacity_bytes());
  EXPECT_EQ(tier->Put({TrafficClass::kChat, 9}, 0, kStartMs + kDayMs, RandomBlock(9, 4000)).code(),
            absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(tier->EvictDownTo(1040).ok());
  EXPECT_EQ(tier->stats().blocks, 1u);
  EXPECT_TRUE(tier->Contains({TrafficClass::kChat, 4}));  // most recently written survives
}

}  // namespace
}  // namespace tandem::kv
