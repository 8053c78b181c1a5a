#include "tandem/kv/tiered_kv_store.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kv_test_util.h"
#include "rocksdb/db.h"

namespace tandem::kv {
namespace {

using testing::kStartMs;
using testing::RandomBlock;
using testing::ScopedTempDir;

constexpr std::size_t kBlock = 1024;
constexpr std::int64_t kDayMs = 24 * 3600 * 1000LL;

class TieredKvStoreTest : public ::testing::Test {
 protected:
  TieredKvStoreOptions Options(std::uint64_t host_blocks, std::uint64_t disk_blocks = 64) {
    TieredKvStoreOptions options;
    options.host_capacity_bytes = host_blocks * kBlock;
    if (disk_blocks > 0) {
      options.disk_path = dir_.Sub("db");
      options.disk_capacity_bytes = disk_blocks * (kBlock + 40);
    }
    options.clock = &clock_;
    options.background_thread = false;
    options.demotion_rate_bytes_per_s = 1 << 30;
    options.demotion_burst_bytes = 1 << 30;
    return options;
  }
  std::unique_ptr<TieredKvStore> Open(const TieredKvStoreOptions& options) {
    auto store = TieredKvStore::Open(options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }
  static void PutChain(TieredKvStore& store, TrafficClass cls, std::uint64_t first,
                       std::uint64_t count) {
    for (std::uint64_t h = first; h < first + count; ++h) {
      auto outcome = store.Put(cls, h, h == first ? 0 : h - 1, RandomBlock(h, kBlock));
      ASSERT_TRUE(outcome.ok()) << outcome.status();
      ASSERT_EQ(*outcome, PutOutcome::kStored) << h;
    }
  }
  static FetchResult FetchInto(TieredKvStore& store, TrafficClass cls,
                               const std::vector<std::uint64_t>& hashes,
                               std::vector<std::vector<std::uint8_t>>& out) {
    out.assign(hashes.size(), std::vector<std::uint8_t>(kBlock, 0));
    std::vector<std::span<std::uint8_t>> spans(out.begin(), out.end());
    return store.Fetch(cls, hashes, spans).get();
  }
  static std::vector<std::uint64_t> Range(std::uint64_t first, std::uint64_t count) {
    std::vector<std::uint64_t> v(count);
    for (std::uint64_t i = 0; i < count; ++i) v[i] = first + i;
    return v;
  }

  ScopedTempDir dir_;
  FakeClock clock_{kStartMs};
};

TEST_F(TieredKvStoreTest, RoundTripHostToDiskAndBackWithIdenticalBytes) {
  auto store = Open(Options(/*host_blocks=*/10));
  PutChain(*store, TrafficClass::kChat, 1, 10);  // host at 100%
  ASSERT_TRUE(store->Step().ok());
  StoreStats stats = store->Stats();
  EXPECT_EQ(stats.host.bytes, 8 * kBlock);  // back to the 80% watermark
  EXPECT_EQ(stats.host.demotions, 2u);
  EXPECT_EQ(stats.disk.blocks, 2u);

  auto chain = Range(1, 10);
  auto lookup = store->Lookup(TrafficClass::kChat, chain);
  ASSERT_TRUE(lookup.ok());
  EXPECT_EQ(lookup->available_prefix, 10u);
  EXPECT_EQ(lookup->host_prefix, 0u);  // the two coldest, 1 and 2, went to disk
  EXPECT_EQ(lookup->tiers[0], KvTier::kDisk);
  EXPECT_EQ(lookup->tiers[1], KvTier::kDisk);
  EXPECT_EQ(lookup->tiers[2], KvTier::kHost);

  std::vector<std::vector<std::uint8_t>> out;
  FetchResult result = FetchInto(*store, TrafficClass::kChat, chain, out);
  ASSERT_TRUE(result.status.ok()) << result.status;
  ASSERT_EQ(result.blocks_ready, 10u);
  for (std::uint64_t h = 1; h <= 10; ++h) EXPECT_EQ(out[h - 1], RandomBlock(h, kBlock)) << h;
  stats = store->Stats();
  EXPECT_EQ(stats.disk.promotions, 2u);
  EXPECT_EQ(stats.host.hits, 8u);
  EXPECT_EQ(stats.disk.hits, 2u);
}

TEST_F(TieredKvStoreTest, PromotedBlocksComeBackToHostAsCleanCopies) {
  TieredKvStoreOptions options = Options(/*host_blocks=*/10);
  options.host_low_watermark = 0.5;
  auto store = Open(options);
  PutChain(*store, TrafficClass::kChat, 1, 10);
  ASSERT_TRUE(store->Step().ok());  // 1..5 demoted
  std::vector<std::vector<std::uint8_t>> out;
  ASSERT_EQ(FetchInto(*store, TrafficClass::kChat, Range(1, 2), out).blocks_ready, 2u);
  // Promotion runs after the callback; wait for it through the event stream.
  for (int i = 0; i < 2000 && store->Stats().host.blocks < 7; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  auto lookup = store->Lookup(TrafficClass::kChat, Range(1, 2));
  ASSERT_TRUE(lookup.ok());
  EXPECT_EQ(lookup->host_prefix, 2u);
  // Clean copies leave host memory without a second disk write: make 1 and 2 the coldest, then
  // push five blocks out. Only three new disk entries appear.
  ASSERT_TRUE(store->Touch(TrafficClass::kChat, Range(6, 5)).ok());
  PutChain(*store, TrafficClass::kChat, 100, 3);
  ASSERT_TRUE(store->Step().ok());
  const StoreStats stats = store->Stats();
  EXPECT_EQ(stats.host.blocks, 5u);
  EXPECT_EQ(stats.disk.blocks, 5u + 3u);
  EXPECT_EQ(store->Lookup(TrafficClass::kChat, Range(1, 2))->host_prefix, 0u);
  EXPECT_EQ(store->Lookup(TrafficClass::kChat, Range(1, 2))->available_prefix, 2u);
}

TEST_F(TieredKvStoreTest, FetchStopsAtTheFirstMissingBlockEvenWhenLaterOnesExist) {
  TieredKvStoreOptions options = Options(/*host_blocks=*/10);
  options.host_low_watermark = 0.5;
  options.fetch_threads = 3;
  auto store = Open(options);
  PutChain(*store, TrafficClass::kChat, 1, 10);
  ASSERT_TRUE(store->Step().ok());  // 1..5 on disk only
  ASSERT_EQ(store->Lookup(TrafficClass::kChat, Range(1, 5))->host_prefix, 0u);
  const std::vector<std::uint64_t> chain = {1, 2, 999, 4, 5};
  std::vector<std::vector<std::uint8_t>> out;
  FetchResult result = FetchInto(*store, TrafficClass::kChat, chain, out);
  EXPECT_TRUE(result.status.ok());
  ASSERT_EQ(result.blocks_ready, 2u);
  EXPECT_EQ(out[0], RandomBlock(1, kBlock));
  EXPECT_EQ(out[1], RandomBlock(2, kBlock));
  // A chain served partly from host memory, partly from disk, in one call.
  FetchResult mixed = FetchInto(*store, TrafficClass::kChat, Range(1, 10), out);
  ASSERT_EQ(mixed.blocks_ready, 10u);
  for (std::uint64_t h = 1; h <= 10; ++h) EXPECT_EQ(out[h - 1], RandomBlock(h, kBlock)) << h;
}

TEST_F(TieredKvStoreTest, DemotionIsPacedByTheTokenBucket) {
  TieredKvStoreOptions options = Options(/*host_blocks=*/100, /*disk_blocks=*/200);
  constexpr std::uint64_t kRate = 20 * kBlock;   // bytes per second
  constexpr std::uint64_t kBurst = 4 * kBlock;
  options.demotion_rate_bytes_per_s = kRate;
  options.demotion_burst_bytes = kBurst;
  auto store = Open(options);
  PutChain(*store, TrafficClass::kAgent, 1, 100);  // 20 blocks above the watermark at once

  constexpr std::int64_t kTickMs = 50;
  std::vector<std::uint64_t> demoted_per_tick;
  std::uint64_t previous = 0;
  for (int tick = 0; tick < 40; ++tick) {
    ASSERT_TRUE(store->Step().ok());
    const std::uint64_t now_demoted = store->Stats().host.demotions * kBlock;
    demoted_per_tick.push_back(now_demoted - previous);
    previous = now_demoted;
    clock_.Advance(kTickMs);
  }
  EXPECT_EQ(previous, 20 * kBlock) << "everything above the watermark is demoted eventually";
  EXPECT_EQ(store->Stats().host.bytes, 80 * kBlock);
  // Over every window of consecutive ticks, no more than burst + rate * window.
  for (std::size_t begin = 0; begin < demoted_per_tick.size(); ++begin) {
    std::uint64_t sum = 0;
    for (std::size_t end = begin; end < demoted_per_tick.size(); ++end) {
      sum += demoted_per_tick[end];
      // Steps begin..end see (end - begin) ticks of refill.
      const std::uint64_t bound = kBurst + kRate * kTickMs * (end - begin) / 1000;
      ASSERT_LE(sum, bound) << "ticks " << begin << ".." << end;
    }
  }
  EXPECT_EQ(demoted_per_tick[0], kBurst) << "the first round is exactly one burst, not a flood";
}

TEST_F(TieredKvStoreTest, HardLimitDropsPutsInsteadOfFailing) {
  auto store = Open(Options(/*host_blocks=*/4, /*disk_blocks=*/0));
  PutChain(*store, TrafficClass::kChat, 1, 4);
  auto outcome = store->Put(TrafficClass::kChat, 99, 4, RandomBlock(99, kBlock));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(*outcome, PutOutcome::kDroppedFull);
  EXPECT_EQ(store->Stats().host.dropped_puts, 1u);
  auto lookup = store->Lookup(TrafficClass::kChat, std::vector<std::uint64_t>{99});
  EXPECT_EQ(lookup->available_prefix, 0u);
  // Without a disk tier, maintenance evicts down to the watermark and Puts fit again.
  ASSERT_TRUE(store->Step().ok());
  EXPECT_EQ(store->Stats().host.evictions, 1u);
  EXPECT_EQ(*store->Put(TrafficClass::kChat, 99, 4, RandomBlock(99, kBlock)), PutOutcome::kStored);
}

TEST_F(TieredKvStoreTest, AtTheHardLimitCleanCopiesMakeRoomBeforeAPutIsDropped) {
  TieredKvStoreOptions options = Options(/*host_blocks=*/4);
  options.host_low_watermark = 0.5;
  auto store = Open(options);
  PutChain(*store, TrafficClass::kChat, 1, 4);
  ASSERT_TRUE(store->Step().ok());  // 1 and 2 demoted
  std::vector<std::vector<std::uint8_t>> out;
  ASSERT_EQ(FetchInto(*store, TrafficClass::kChat, Range(1, 2), out).blocks_ready, 2u);
  for (int i = 0; i < 2000 && store->Stats().host.blocks < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(store->Stats().host.blocks, 4u);  // full again: 3, 4 dirty; 1, 2 clean copies
  EXPECT_EQ(*store->Put(TrafficClass::kChat, 5, 4, RandomBlock(5, kBlock)), PutOutcome::kStored);
  EXPECT_EQ(*store->Put(TrafficClass::kChat, 6, 5, RandomBlock(6, kBlock)), PutOutcome::kStored);
  // Only dirty blocks are left; the next Put has nothing free to displace.
  EXPECT_EQ(*store->Put(TrafficClass::kChat, 7, 6, RandomBlock(7, kBlock)),
            PutOutcome::kDroppedFull);
  const StoreStats stats = store->Stats();
  EXPECT_EQ(stats.host.dropped_puts, 1u);
  EXPECT_EQ(stats.disk.blocks, 2u);
  auto lookup = store->Lookup(TrafficClass::kChat, Range(1, 6));
  ASSERT_TRUE(lookup.ok());
  EXPECT_EQ(lookup->available_prefix, 6u) << "the dropped clean copies are still on disk";
}

TEST_F(TieredKvStoreTest, DiskIsBroughtBackToItsWatermarkOldestFirst) {
  TieredKvStoreOptions options = Options(/*host_blocks=*/10, /*disk_blocks=*/10);
  options.host_low_watermark = 0.1;
  auto store = Open(options);
  PutChain(*store, TrafficClass::kChat, 1, 10);
  ASSERT_TRUE(store->Step().ok());  // 1..9 demoted, then the disk sheds down to 80%
  const StoreStats stats = store->Stats();
  EXPECT_EQ(stats.host.demotions, 9u);
  EXPECT_EQ(stats.disk.blocks, 8u);
  EXPECT_EQ(stats.disk.evictions, 1u);
  auto lookup = store->Lookup(TrafficClass::kChat, Range(1, 10));
  EXPECT_EQ(lookup->available_prefix, 0u) << "block 1, the oldest, was the one evicted";
  EXPECT_EQ(store->Lookup(TrafficClass::kChat, Range(2, 9))->available_prefix, 9u);
  auto events = store->events().ReadAfter(0, 1000);
  ASSERT_TRUE(events.ok());
  const KvEvent& last_disk_removal = *std::find_if(
      events->rbegin(), events->rend(), [](const KvEvent& e) {
        return e.tier == KvTier::kDisk && e.kind == KvEvent::Kind::kRemoved;
      });
  EXPECT_EQ(last_disk_removal.key.hash, 1u);
}

TEST_F(TieredKvStoreTest, ExpiredBlocksAreNeverServedAndAreRemovedFromEveryTier) {
  TieredKvStoreOptions options = Options(/*host_blocks=*/10);
  options.ttl.ttl_ms = {10 * kDayMs, 1000};  // agent blocks live one second
  options.ttl_sweep_interval_ms = 500;
  auto store = Open(options);
  PutChain(*store, TrafficClass::kAgent, 1, 9);  // 1 goes to disk
  PutChain(*store, TrafficClass::kChat, 50, 1);
  ASSERT_TRUE(store->Step().ok());
  ASSERT_EQ(store->Stats().disk.blocks, 2u);  // agent 1 and 2
  clock_.Advance(1000);
  auto lookup = store->Lookup(TrafficClass::kAgent, Range(1, 9));
  ASSERT_TRUE(lookup.ok());
  EXPECT_EQ(lookup->available_prefix, 0u);
  std::vector<std::vector<std::uint8_t>> out;
  EXPECT_EQ(FetchInto(*store, TrafficClass::kAgent, Range(1, 9), out).blocks_ready, 0u);
  EXPECT_EQ(FetchInto(*store, TrafficClass::kAgent, Range(2, 1), out).blocks_ready, 0u);
  ASSERT_TRUE(store->Step().ok());  // sweep
  StoreStats stats = store->Stats();
  EXPECT_EQ(stats.host.blocks, 1u);  // only the chat block is left
  EXPECT_EQ(stats.disk.blocks, 0u);
  StoreSnapshot snapshot = store->Snapshot();
  ASSERT_EQ(snapshot.host.size(), 1u);
  EXPECT_EQ(snapshot.host[0].key.cls, TrafficClass::kChat);
  EXPECT_TRUE(snapshot.disk.empty());
  // The chain can be stored again after expiry.
  EXPECT_EQ(*store->Put(TrafficClass::kAgent, 1, 0, RandomBlock(1, kBlock)), PutOutcome::kStored);
}

TEST_F(TieredKvStoreTest, RestartKeepsDiskBlocksAndAnnouncesThem) {
  StoreSnapshot before;
  {
    auto store = Open(Options(/*host_blocks=*/10));
    PutChain(*store, TrafficClass::kChat, 1, 10);
    ASSERT_TRUE(store->Step().ok());
    before = store->Snapshot();
    ASSERT_EQ(before.disk.size(), 2u);
  }
  auto store = Open(Options(/*host_blocks=*/10));
  StoreSnapshot after = store->Snapshot();
  EXPECT_NE(after.incarnation, before.incarnation);
  EXPECT_TRUE(after.host.empty());
  ASSERT_EQ(after.disk.size(), 2u);
  std::vector<std::uint64_t> hashes;
  for (const BlockRecord& r : after.disk) hashes.push_back(r.key.hash);
  std::sort(hashes.begin(), hashes.end());
  EXPECT_EQ(hashes, (std::vector<std::uint64_t>{1, 2}));
  auto events = store->events().ReadAfter(0, 100);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ(after.seq, 2u);
  std::vector<std::vector<std::uint8_t>> out;
  FetchResult result = FetchInto(*store, TrafficClass::kChat, Range(1, 2), out);
  ASSERT_EQ(result.blocks_ready, 2u);
  EXPECT_EQ(out[0], RandomBlock(1, kBlock));
  EXPECT_EQ(out[1], RandomBlock(2, kBlock));
}

TEST_F(TieredKvStoreTest, CorruptDiskBlockEndsTheFetchedPrefix) {
  {
    auto store = Open(Options(/*host_blocks=*/10));
    PutChain(*store, TrafficClass::kChat, 1, 10);
    ASSERT_TRUE(store->Step().ok());  // 1 and 2 on disk
  }
  {
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir_.Sub("db"), &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    const std::string key("\x00\x00\x00\x00\x00\x00\x00\x00\x02", 9);  // chat, hash 2
    std::string value;
    ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), key, &value).ok());
    value[value.size() / 2] ^= 0x80;
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), key, value).ok());
  }
  auto store = Open(Options(/*host_blocks=*/10));
  std::vector<std::vector<std::uint8_t>> out;
  FetchResult result = FetchInto(*store, TrafficClass::kChat, Range(1, 2), out);
  EXPECT_TRUE(result.status.ok());
  EXPECT_EQ(result.blocks_ready, 1u);
  EXPECT_EQ(out[0], RandomBlock(1, kBlock));
  EXPECT_EQ(store->Stats().disk.corruptions, 1u);
  EXPECT_EQ(store->Lookup(TrafficClass::kChat, Range(1, 2))->available_prefix, 1u);
}

TEST_F(TieredKvStoreTest, BadInputIsRejectedAndLeavesNoState) {
  auto store = Open(Options(/*host_blocks=*/10));
  const auto block = RandomBlock(1, kBlock);
  auto empty = store->Put(TrafficClass::kChat, 1, 0, {});
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  auto unknown = store->Put(static_cast<TrafficClass>(5), 1, 0, block);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Lookup(static_cast<TrafficClass>(5), Range(1, 1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Touch(static_cast<TrafficClass>(5), Range(1, 1)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->events().last_seq(), 0u);
  EXPECT_EQ(store->Stats().host.blocks, 0u);

  ASSERT_EQ(*store->Put(TrafficClass::kChat, 1, 0, block), PutOutcome::kStored);
  auto duplicate = store->Put(TrafficClass::kChat, 1, 0, RandomBlock(2, kBlock));
  EXPECT_EQ(duplicate.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store->events().last_seq(), 1u);
  std::vector<std::vector<std::uint8_t>> out;
  ASSERT_EQ(FetchInto(*store, TrafficClass::kChat, Range(1, 1), out).blocks_ready, 1u);
  EXPECT_EQ(out[0], block) << "a rejected duplicate must not replace the stored bytes";

  std::vector<std::uint8_t> small(10);
  std::vector<std::span<std::uint8_t>> spans{small};
  FetchResult wrong = store->Fetch(TrafficClass::kChat, Range(1, 1), spans).get();
  EXPECT_EQ(wrong.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(wrong.blocks_ready, 0u);
  FetchResult mismatch = store->Fetch(TrafficClass::kChat, Range(1, 2), spans).get();
  EXPECT_EQ(mismatch.status.code(), absl::StatusCode::kInvalidArgument);

  TieredKvStoreOptions bad = Options(10);
  bad.host_low_watermark = 1.5;
  EXPECT_EQ(TieredKvStore::Open(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = Options(0);
  EXPECT_EQ(TieredKvStore::Open(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TieredKvStoreTest, EventsAreOrderedAndASnapshotResyncsAGap) {
  TieredKvStoreOptions options = Options(/*host_blocks=*/10);
  options.event_log_capacity = 8;
  auto store = Open(options);
  PutChain(*store, TrafficClass::kChat, 1, 3);
  auto first = store->events().ReadAfter(0, 100);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*first)[i].seq, i + 1);
    EXPECT_EQ((*first)[i].key.hash, i + 1);
    EXPECT_EQ((*first)[i].parent_hash, i);
    EXPECT_EQ((*first)[i].tier, KvTier::kHost);
  }
  PutChain(*store, TrafficClass::kChat, 4, 7);  // 10 blocks, then demote two: more than 8 events
  ASSERT_TRUE(store->Step().ok());
  EXPECT_EQ(store->events().ReadAfter(3, 100).status().code(), absl::StatusCode::kOutOfRange);

  // Resync: the snapshot plus every later event describes the store exactly.
  StoreSnapshot snapshot = store->Snapshot();
  std::set<std::uint64_t> host, disk;
  for (const BlockRecord& r : snapshot.host) host.insert(r.key.hash);
  for (const BlockRecord& r : snapshot.disk) disk.insert(r.key.hash);
  std::vector<std::vector<std::uint8_t>> out;
  ASSERT_EQ(FetchInto(*store, TrafficClass::kChat, Range(1, 1), out).blocks_ready, 1u);
  for (int i = 0; i < 2000 && store->Stats().host.blocks < 9; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  auto later = store->events().ReadAfter(snapshot.seq, 100);
  ASSERT_TRUE(later.ok()) << later.status();
  for (const KvEvent& e : *later) {
    auto& set = e.tier == KvTier::kHost ? host : disk;
    if (e.kind == KvEvent::Kind::kStored) {
      set.insert(e.key.hash);
    } else {
      set.erase(e.key.hash);
    }
  }
  StoreSnapshot now = store->Snapshot();
  std::set<std::uint64_t> host_now, disk_now;
  for (const BlockRecord& r : now.host) host_now.insert(r.key.hash);
  for (const BlockRecord& r : now.disk) disk_now.insert(r.key.hash);
  EXPECT_EQ(host, host_now);
  EXPECT_EQ(disk, disk_now);
  EXPECT_TRUE(host.count(1) == 1) << "promoted back";
}

TEST_F(TieredKvStoreTest, ConcurrentPutsLookupsAndFetchesStayConsistent) {
  TieredKvStoreOptions options = Options(/*host_blocks=*/64, /*disk_blocks=*/256);
  options.background_thread = true;
  options.background_interval_ms = 1;
  auto store = Open(options);
  constexpr int kThreads = 4;
  constexpr std::uint64_t kPerThread = 60;
  std::atomic<int> wrong_bytes{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::uint64_t base = 1000 * static_cast<std::uint64_t>(t + 1);
      for (std::uint64_t i = 0; i < kPerThread; ++i) {
        auto put = store->Put(TrafficClass::kChat, base + i, i == 0 ? 0 : base + i - 1,
                              RandomBlock(base + i, kBlock));
        if (!put.ok()) ++errors;
        // The background thread may not be scheduled at all on a loaded machine before the puts
        // end; one worker also steps, so demotions always race the other threads' calls.
        if (t == 0 && (i + 1) % 10 == 0 && !store->Step().ok()) ++errors;
        auto chain = Range(base, i + 1);
        auto lookup = store->Lookup(TrafficClass::kChat, chain);
        if (!lookup.ok()) {
          ++errors;
          continue;
        }
        const std::size_t n = lookup->available_prefix;
        std::vector<std::vector<std::uint8_t>> out(n, std::vector<std::uint8_t>(kBlock));
        std::vector<std::span<std::uint8_t>> spans(out.begin(), out.end());
        FetchResult result =
            store->Fetch(TrafficClass::kChat, std::span(chain).first(n), spans).get();
        if (!result.status.ok()) ++errors;
        for (std::size_t k = 0; k < result.blocks_ready; ++k) {
          if (out[k] != RandomBlock(chain[k], kBlock)) ++wrong_bytes;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(wrong_bytes.load(), 0);
  const StoreStats stats = store->Stats();
  EXPECT_LE(stats.host.bytes, 64 * kBlock);
  EXPECT_GT(stats.disk.blocks, 0u);
  // Even with the background thread still demoting, a snapshot and the events up to its seq
  // agree exactly, and every listed block reads back intact.
  StoreSnapshot snapshot = store->Snapshot();
  auto events = store->events().ReadAfter(0, 1 << 20);
  ASSERT_TRUE(events.ok()) << events.status();
  std::set<std::uint64_t> host, disk;
  for (const KvEvent& e : *events) {
    if (e.seq > snapshot.seq) break;
    auto& set = e.tier == KvTier::kHost ? host : disk;
    if (e.kind == KvEvent::Kind::kStored) {
      EXPECT_TRUE(set.insert(e.key.hash).second) << "stored twice without removal: " << e.seq;
    } else {
      EXPECT_EQ(set.erase(e.key.hash), 1u) << "removed while absent: " << e.seq;
    }
  }
  std::set<std::uint64_t> host_snap, disk_snap;
  for (const BlockRecord& r : snapshot.host) host_snap.insert(r.key.hash);
  for (const BlockRecord& r : snapshot.disk) disk_snap.insert(r.key.hash);
  EXPECT_EQ(host, host_snap);
  EXPECT_EQ(disk, disk_snap);
}

}  // namespace
}  // namespace tandem::kv
