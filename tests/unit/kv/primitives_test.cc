#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tandem/kv/crc32c.h"
#include "tandem/kv/event_log.h"
#include "tandem/kv/token_bucket.h"
#include "tandem/kv/types.h"

namespace tandem::kv {
namespace {

std::span<const std::uint8_t> AsBytes(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

TEST(Crc32cTest, MatchesPublishedCheckValues) {
  // The CRC catalogue's check value for CRC-32C and the RFC 3720 (iSCSI) zero vector.
  EXPECT_EQ(Crc32c(AsBytes("123456789")), 0xE3069283u);
  std::vector<std::uint8_t> zeros(32, 0);
  EXPECT_EQ(Crc32c(zeros), 0x8A9136AAu);
  std::vector<std::uint8_t> ones(32, 0xFF);
  EXPECT_EQ(Crc32c(ones), 0x62A8AB43u);
}

TEST(Crc32cTest, ExtendEqualsOneShotAndDetectsOneBitFlips) {
  std::string text = "the quick brown fox jumps over the lazy dog, twice over";
  const std::uint32_t whole = Crc32c(AsBytes(text));
  for (std::size_t split = 0; split <= text.size(); ++split) {
    std::uint32_t crc = Crc32c(AsBytes(text.substr(0, split)));
    EXPECT_EQ(Crc32cExtend(crc, AsBytes(text.substr(split))), whole) << split;
  }
  for (std::size_t i = 0; i < text.size(); ++i) {
    std::string flipped = text;
    flipped[i] ^= 0x10;
    EXPECT_NE(Crc32c(AsBytes(flipped)), whole) << i;
  }
}

TEST(TokenBucketTest, GrantsBurstThenRate) {
  TokenBucket bucket(/*rate=*/1000, /*burst=*/500, /*now_ms=*/0);
  EXPECT_TRUE(bucket.TryTake(300, 0));
  EXPECT_TRUE(bucket.TryTake(200, 0));
  EXPECT_FALSE(bucket.TryTake(1, 0));
  EXPECT_FALSE(bucket.TryTake(101, 100));  // 100 ms at 1000 B/s = 100 bytes
  EXPECT_TRUE(bucket.TryTake(100, 100));
  EXPECT_TRUE(bucket.TryTake(500, 10'000));  // refill caps at the burst
  EXPECT_FALSE(bucket.TryTake(1, 10'000));
}

TEST(TokenBucketTest, ClockGoingBackwardsMintsNothing) {
  TokenBucket bucket(1000, 100, 1000);
  EXPECT_TRUE(bucket.TryTake(100, 1000));
  EXPECT_FALSE(bucket.TryTake(1, 0));
  EXPECT_FALSE(bucket.TryTake(1, 1000));
}

TEST(TokenBucketTest, OversizedRequestOnlyFromFullBucket) {
  TokenBucket bucket(1000, 100, 0);
  EXPECT_TRUE(bucket.TryTake(50, 0));
  EXPECT_FALSE(bucket.TryTake(300, 0));
  EXPECT_TRUE(bucket.TryTake(300, 50));  // full again after 50 ms
  EXPECT_FALSE(bucket.TryTake(1, 250));  // 200 bytes of debt repaid by t=250, nothing more
  EXPECT_TRUE(bucket.TryTake(1, 251));
}

TEST(EventLogTest, SequenceIsDenseAndReadsResume) {
  EventLog log(100);
  for (std::uint64_t h = 1; h <= 5; ++h) {
    EXPECT_EQ(log.Publish(KvTier::kHost, KvEvent::Kind::kStored, {TrafficClass::kChat, h}, h - 1),
              h);
  }
  auto all = log.ReadAfter(0, 100);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 5u);
  for (std::size_t i = 0; i < all->size(); ++i) {
    EXPECT_EQ((*all)[i].seq, i + 1);
    EXPECT_EQ((*all)[i].key.hash, i + 1);
  }
  auto tail = log.ReadAfter(3, 1);
  ASSERT_TRUE(tail.ok());
  ASSERT_EQ(tail->size(), 1u);
  EXPECT_EQ((*tail)[0].seq, 4u);
  auto none = log.ReadAfter(5, 10);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(log.ReadAfter(6, 10).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(EventLogTest, OverflowIsReportedAsGap) {
  EventLog log(3);
  for (std::uint64_t h = 1; h <= 5; ++h) {
    log.Publish(KvTier::kDisk, KvEvent::Kind::kRemoved, {TrafficClass::kAgent, h}, 0);
  }
  EXPECT_EQ(log.ReadAfter(0, 10).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(log.ReadAfter(1, 10).status().code(), absl::StatusCode::kOutOfRange);
  auto kept = log.ReadAfter(2, 10);
  ASSERT_TRUE(kept.ok()) << kept.status();
  ASSERT_EQ(kept->size(), 3u);
  EXPECT_EQ(kept->front().seq, 3u);
  EXPECT_EQ(log.last_seq(), 5u);
}

TEST(TrafficClassTest, ParsesKnownNamesAndRejectsOthers) {
  EXPECT_EQ(*ParseTrafficClass("chat"), TrafficClass::kChat);
  EXPECT_EQ(*ParseTrafficClass("agent"), TrafficClass::kAgent);
  auto bad = ParseTrafficClass("batch");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("batch"), absl::string_view::npos);
  EXPECT_FALSE(ValidateTrafficClass(static_cast<TrafficClass>(7)).ok());
  EXPECT_EQ(TtlPolicy().For(TrafficClass::kChat), 7LL * 24 * 3600 * 1000);
  EXPECT_EQ(TtlPolicy().For(TrafficClass::kAgent), 3LL * 24 * 3600 * 1000);
}

}  // namespace
}  // namespace tandem::kv
