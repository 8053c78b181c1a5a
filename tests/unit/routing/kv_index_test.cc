#include "tandem/routing/kv_index.h"

#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::routing {
namespace {

constexpr WorkerMask kAll = ~WorkerMask{0};

KvEvent Stored(std::uint64_t seq, std::vector<BlockHash> hashes, Tier tier = Tier::kDevice) {
  KvEvent e;
  e.seq = seq;
  e.kind = KvEvent::Kind::kStored;
  e.tier = tier;
  e.block_hashes = std::move(hashes);
  return e;
}

KvEvent Removed(std::uint64_t seq, std::vector<BlockHash> hashes, Tier tier = Tier::kDevice) {
  KvEvent e = Stored(seq, std::move(hashes), tier);
  e.kind = KvEvent::Kind::kRemoved;
  return e;
}

KvEvent Snapshot(std::uint64_t seq, std::vector<KvEvent::TierBlocks> tiers) {
  KvEvent e;
  e.seq = seq;
  e.kind = KvEvent::Kind::kSnapshot;
  e.snapshot = std::move(tiers);
  return e;
}

class KvIndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(index_.AddWorker(0, 1).ok());
    ASSERT_TRUE(index_.AddWorker(1, 1).ok());
  }
  EventOutcome Apply(WorkerSlot w, const KvEvent& e) {
    absl::StatusOr<EventOutcome> outcome = index_.Apply(w, e);
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    return outcome.ok() ? *outcome : EventOutcome::kIgnoredStale;
  }
  MatchResult Match(std::vector<BlockHash> chain) {
    MatchResult m;
    index_.Match(chain, kAll, &m);
    return m;
  }
  KvIndex index_{KvIndex::Options{.max_blocks = 1000}};
};

TEST_F(KvIndexTest, OverlapIsTheLeadingRunOfTheChain) {
  EXPECT_EQ(Apply(0, Stored(1, {10, 11, 12})), EventOutcome::kApplied);
  EXPECT_EQ(Apply(1, Stored(1, {10, 11})), EventOutcome::kApplied);
  EXPECT_EQ(Apply(1, Stored(2, {13})), EventOutcome::kApplied);  // not contiguous with 10, 11
  const MatchResult m = Match({10, 11, 12, 99});
  EXPECT_EQ(m[0].blocks(), 3);
  EXPECT_EQ(m[1].blocks(), 2);
  // A chain whose first block is unknown matches nothing, even if later blocks are known.
  EXPECT_EQ(Match({99, 11, 12})[0].blocks(), 0);
  // Worker 1 holds 13 but not 12: its run stops at 12.
  EXPECT_EQ(Match({10, 11, 12, 13})[1].blocks(), 2);
}

TEST_F(KvIndexTest, EachBlockCountsInItsBestTier) {
  Apply(0, Stored(1, {10, 11, 12}, Tier::kHost));
  Apply(0, Stored(2, {10}, Tier::kDevice));
  Apply(0, Stored(3, {12}, Tier::kDisk));
  const MatchResult m = Match({10, 11, 12});
  EXPECT_EQ(m[0].device, 1);
  EXPECT_EQ(m[0].host, 2);  // 12 is on host and disk: host wins
  EXPECT_EQ(m[0].disk, 0);
  EXPECT_DOUBLE_EQ(m[0].Credit(TierCredits{}), 1.0 + 2 * 0.75);
  EXPECT_EQ(index_.blocks_on(0, Tier::kHost), 3);
  EXPECT_EQ(index_.blocks_on(0, Tier::kDisk), 1);
}

TEST_F(KvIndexTest, RemovedBlocksStopTheRunAndFreeEntries) {
  Apply(0, Stored(1, {10, 11, 12}));
  Apply(0, Removed(2, {11}));
  EXPECT_EQ(Match({10, 11, 12})[0].blocks(), 1);
  EXPECT_EQ(index_.size(), 2u);
  EXPECT_EQ(index_.blocks_on(0, Tier::kDevice), 2);
  // Removing from the host tier leaves the device copy.
  Apply(0, Removed(3, {10}, Tier::kHost));
  EXPECT_EQ(Match({10})[0].device, 1);
}

TEST_F(KvIndexTest, EvictionsCountBlocksAWorkerNoLongerHoldsInAnyTier) {
  Apply(0, Stored(1, {10, 11, 12}));
  Apply(0, Stored(2, {12}, Tier::kHost));
  Apply(1, Stored(1, {10}));
  Apply(0, Removed(3, {11, 12, 99}));  // 12 stays on host; 99 was never there
  EXPECT_EQ(index_.evicted_blocks(0), 1);
  Apply(0, Removed(4, {12}, Tier::kHost));
  EXPECT_EQ(index_.evicted_blocks(0), 2);
  Apply(0, Removed(5, {12}, Tier::kHost));  // already gone: not twice
  EXPECT_EQ(index_.evicted_blocks(0), 2);
  EXPECT_EQ(index_.evicted_blocks(1), 0);  // per worker
  Apply(1, Removed(2, {10}));
  EXPECT_EQ(index_.evicted_blocks(1), 1);
  EXPECT_EQ(index_.evicted_blocks(0), 2);
  ASSERT_TRUE(index_.RemoveWorker(1).ok());
  EXPECT_EQ(index_.evicted_blocks(1), 0);
  EXPECT_EQ(index_.evicted_blocks(-1), 0);
}

TEST_F(KvIndexTest, CandidatesLimitTheMatch) {
  Apply(0, Stored(1, {10, 11}));
  Apply(1, Stored(1, {10, 11}));
  MatchResult m;
  index_.Match(std::vector<BlockHash>{10, 11}, SlotBit(1), &m);
  EXPECT_EQ(m[0].blocks(), 0);
  EXPECT_EQ(m[1].blocks(), 2);
}

TEST_F(KvIndexTest, SkippedSeqMarksStaleUntilSnapshot) {
  Apply(0, Stored(1, {10}));
  EXPECT_EQ(Apply(0, Stored(3, {11})), EventOutcome::kGap);
  EXPECT_TRUE(index_.IsStale(0));
  // A stale worker's blocks are not trusted, and further deltas are ignored.
  EXPECT_EQ(Match({10})[0].blocks(), 0);
  EXPECT_EQ(Apply(0, Stored(4, {12})), EventOutcome::kIgnoredStale);
  // The snapshot replaces everything: 10 is gone, 20 and 21 are there.
  EXPECT_EQ(Apply(0, Snapshot(7, {{Tier::kDevice, {20, 21}}, {Tier::kHost, {22}}})),
            EventOutcome::kApplied);
  EXPECT_FALSE(index_.IsStale(0));
  EXPECT_EQ(Match({10})[0].blocks(), 0);
  const MatchResult m = Match({20, 21, 22});
  EXPECT_EQ(m[0].device, 2);
  EXPECT_EQ(m[0].host, 1);
  EXPECT_EQ(index_.blocks_on(0, Tier::kDevice), 2);
  // The sequence continues from the snapshot's seq.
  EXPECT_EQ(Apply(0, Stored(8, {30})), EventOutcome::kApplied);
  EXPECT_EQ(index_.last_seq(0), 8u);
  // The other worker was never affected.
  EXPECT_FALSE(index_.IsStale(1));
}

TEST_F(KvIndexTest, RetransmittedSeqIsIgnored) {
  Apply(0, Stored(1, {10}));
  Apply(0, Removed(2, {10}));
  EXPECT_EQ(Apply(0, Stored(1, {10})), EventOutcome::kDuplicate);
  EXPECT_EQ(Match({10})[0].blocks(), 0);
}

TEST_F(KvIndexTest, FirstEventMustBeSeqOne) {
  EXPECT_EQ(Apply(0, Stored(2, {10})), EventOutcome::kGap);
}

TEST_F(KvIndexTest, HeartbeatSeqAheadOfAppliedIsAGap) {
  Apply(0, Stored(1, {10}));
  ASSERT_EQ(*index_.ObserveSeq(0, 1), EventOutcome::kApplied);
  EXPECT_FALSE(index_.IsStale(0));
  ASSERT_EQ(*index_.ObserveSeq(0, 2), EventOutcome::kGap);
  EXPECT_TRUE(index_.IsStale(0));
}

TEST_F(KvIndexTest, NewIncarnationForgetsTheOldOne) {
  Apply(0, Stored(1, {10}));
  ASSERT_TRUE(index_.AddWorker(0, 1).ok());  // same incarnation: nothing changes
  EXPECT_EQ(Match({10})[0].blocks(), 1);
  ASSERT_TRUE(index_.AddWorker(0, 2).ok());
  EXPECT_EQ(Match({10})[0].blocks(), 0);
  EXPECT_EQ(index_.size(), 0u);
  EXPECT_EQ(Apply(0, Stored(1, {11})), EventOutcome::kApplied);
}

TEST_F(KvIndexTest, RejectsUnknownWorkersAndTiers) {
  EXPECT_EQ(index_.Apply(5, Stored(1, {10})).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(index_.Apply(-1, Stored(1, {10})).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(index_.AddWorker(kMaxWorkers, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(index_.Apply(0, Stored(1, {10}, static_cast<Tier>(7))).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(index_.Apply(0, Snapshot(1, {{static_cast<Tier>(-1), {10}}})).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(index_.last_seq(0), 0u);  // nothing was applied
  ASSERT_TRUE(index_.RemoveWorker(1).ok());
  EXPECT_EQ(index_.Apply(1, Stored(1, {10})).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(KvIndexPruneTest, ForgetsLeastRecentlyUsedBeyondTheBound) {
  KvIndex index(KvIndex::Options{.max_blocks = 4});
  ASSERT_TRUE(index.AddWorker(0, 1).ok());
  index.Store(0, Tier::kDevice, std::vector<BlockHash>{1, 2});
  index.Store(0, Tier::kDevice, std::vector<BlockHash>{3, 4});
  index.Touch(std::vector<BlockHash>{1, 2});  // 1, 2 are now the most recent
  index.Store(0, Tier::kDevice, std::vector<BlockHash>{5, 6});
  EXPECT_EQ(index.size(), 4u);
  EXPECT_EQ(index.blocks_on(0, Tier::kDevice), 4);
  MatchResult m;
  index.Match(std::vector<BlockHash>{1, 2}, ~WorkerMask{0}, &m);
  EXPECT_EQ(m[0].blocks(), 2);
  index.Match(std::vector<BlockHash>{3}, ~WorkerMask{0}, &m);
  EXPECT_EQ(m[0].blocks(), 0);
}

TEST(KvIndexPruneTest, PrunesLeavesBeforeRoots) {
  KvIndex index(KvIndex::Options{.max_blocks = 3});
  ASSERT_TRUE(index.AddWorker(0, 1).ok());
  index.Store(0, Tier::kDevice, std::vector<BlockHash>{1, 2, 3});
  index.Store(0, Tier::kDevice, std::vector<BlockHash>{9});
  // The one block forgotten is the leaf 3, so the prefix 1, 2 still matches.
  MatchResult m;
  index.Match(std::vector<BlockHash>{1, 2, 3}, ~WorkerMask{0}, &m);
  EXPECT_EQ(m[0].blocks(), 2);
}

}  // namespace
}  // namespace tandem::routing

namespace tandem::routing {
namespace {

// Random stores, removals, snapshots and restarts against a plain set of (worker, tier, hash):
// every match, count and size must agree (no pruning: the bound is never reached).
TEST(KvIndexModelTest, AgreesWithAPlainSetUnderRandomOperations) {
  constexpr int kWorkers = 4;
  KvIndex index(KvIndex::Options{.max_blocks = 1 << 20});
  std::set<std::tuple<int, int, BlockHash>> model;
  std::mt19937 rng(7);
  std::vector<std::uint64_t> seq(kWorkers, 0);
  for (int w = 0; w < kWorkers; ++w) ASSERT_TRUE(index.AddWorker(w, 1).ok());
  auto random_hashes = [&](int n) {
    std::vector<BlockHash> h;
    for (int i = 0; i < n; ++i) h.push_back(1 + rng() % 40);
    return h;
  };
  for (int step = 0; step < 3000; ++step) {
    const int w = static_cast<int>(rng() % kWorkers);
    const Tier tier = static_cast<Tier>(rng() % kNumTiers);
    const int t = static_cast<int>(tier);
    const int op = static_cast<int>(rng() % 20);
    if (op < 10) {
      KvEvent e = Stored(++seq[w], random_hashes(1 + rng() % 5), tier);
      ASSERT_EQ(*index.Apply(w, e), EventOutcome::kApplied);
      for (BlockHash h : e.block_hashes) model.insert({w, t, h});
    } else if (op < 18) {
      KvEvent e = Removed(++seq[w], random_hashes(1 + rng() % 5), tier);
      ASSERT_EQ(*index.Apply(w, e), EventOutcome::kApplied);
      for (BlockHash h : e.block_hashes) model.erase({w, t, h});
    } else if (op == 18) {
      std::vector<BlockHash> kept = random_hashes(3);
      ASSERT_EQ(*index.Apply(w, Snapshot(++seq[w], {{tier, kept}})), EventOutcome::kApplied);
      std::erase_if(model, [w](const auto& e) { return std::get<0>(e) == w; });
      for (BlockHash h : kept) model.insert({w, t, h});
    } else {
      ASSERT_TRUE(index.AddWorker(w, 2 + step).ok());  // restart
      seq[w] = 0;
      std::erase_if(model, [w](const auto& e) { return std::get<0>(e) == w; });
    }
    // Check one random chain and the counts.
    const std::vector<BlockHash> chain = random_hashes(4);
    MatchResult m;
    index.Match(chain, ~WorkerMask{0}, &m);
    std::set<BlockHash> distinct;
    for (const auto& [mw, mt, mh] : model) distinct.insert(mh);
    ASSERT_EQ(index.size(), distinct.size()) << "step " << step;
    for (int v = 0; v < kWorkers; ++v) {
      int expected = 0;
      for (BlockHash h : chain) {
        bool held = false;
        for (int tt = 0; tt < kNumTiers; ++tt) held = held || model.count({v, tt, h}) > 0;
        if (!held) break;
        ++expected;
      }
      ASSERT_EQ(m[v].blocks(), expected) << "step " << step << " worker " << v;
      for (int tt = 0; tt < kNumTiers; ++tt) {
        std::int64_t count = 0;
        for (const auto& [mw, mt, mh] : model) count += (mw == v && mt == tt);
        ASSERT_EQ(index.blocks_on(v, static_cast<Tier>(tt)), count);
      }
    }
  }
}

}  // namespace
}  // namespace tandem::routing
