#include "embedding_cache.h"

#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace tandem::encoder {
namespace {

using std::chrono::milliseconds;
using TimePoint = std::chrono::steady_clock::time_point;

// rows x hidden floats, each row filled with `value`.
Embedding Rows(int rows, int hidden, float value) {
  Embedding e;
  e.rows = rows;
  e.hidden = hidden;
  e.data.assign(static_cast<std::size_t>(rows) * hidden, value);
  return e;
}

struct FakeClock {
  TimePoint t{};
  std::function<TimePoint()> fn() {
    return [this] { return t; };
  }
};

EmbeddingCacheOptions Options(FakeClock& clock, std::size_t max_bytes) {
  EmbeddingCacheOptions o;
  o.max_bytes = max_bytes;
  o.default_lease = milliseconds(1000);
  o.max_lease = milliseconds(5000);
  o.now = clock.fn();
  return o;
}

TEST(EmbeddingCacheTest, ASecondRequestForTheSameKeyIsAHitAndDoesNotRecompute) {
  FakeClock clock;
  EmbeddingCache cache(Options(clock, 1 << 20));
  int computes = 0;
  auto compute = [&]() -> absl::StatusOr<Embedding> {
    ++computes;
    return Rows(3, 4, 1.5f);
  };
  auto first = cache.GetOrCompute("k", milliseconds(0), compute);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->hit);
  auto second = cache.GetOrCompute("k", milliseconds(0), compute);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->hit);
  EXPECT_EQ(computes, 1);
  EXPECT_EQ(first->embedding, second->embedding);
  EXPECT_NE(first->lease_id, second->lease_id);
  EXPECT_EQ(cache.stats().bytes_held, 3u * 4 * sizeof(float));
}

TEST(EmbeddingCacheTest, IdenticalConcurrentRequestsRunTheTowerOnce) {
  FakeClock clock;
  EmbeddingCache cache(Options(clock, 1 << 20));
  constexpr int kCallers = 8;
  std::atomic<int> computes{0};
  absl::Notification release_tower;
  auto compute = [&]() -> absl::StatusOr<Embedding> {
    ++computes;
    release_tower.WaitForNotification();
    return Rows(2, 2, 7.0f);
  };
  std::vector<absl::StatusOr<EmbeddingCache::Pinned>> results(kCallers,
                                                              absl::UnknownError("unset"));
  std::vector<std::thread> callers;
  for (int i = 0; i < kCallers; ++i) {
    callers.emplace_back([&, i] { results[i] = cache.GetOrCompute("img", milliseconds(0), compute); });
  }
  // Every caller but the one computing has joined the flight before the tower finishes.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (cache.stats().joined < kCallers - 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  const std::uint64_t joined = cache.stats().joined;
  release_tower.Notify();
  for (auto& t : callers) t.join();
  EXPECT_EQ(joined, static_cast<std::uint64_t>(kCallers - 1));
  EXPECT_EQ(computes.load(), 1);
  std::set<std::string> leases;
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->embedding, results[0]->embedding);
    leases.insert(r->lease_id);
  }
  EXPECT_EQ(leases.size(), static_cast<std::size_t>(kCallers));
  EXPECT_EQ(cache.stats().leases, static_cast<std::size_t>(kCallers));
}

TEST(EmbeddingCacheTest, AFailedComputationReachesEveryWaiterAndIsNotCached) {
  FakeClock clock;
  EmbeddingCache cache(Options(clock, 1 << 20));
  absl::Notification release_tower;
  std::atomic<int> computes{0};
  auto failing = [&]() -> absl::StatusOr<Embedding> {
    ++computes;
    release_tower.WaitForNotification();
    return absl::InvalidArgumentError("corrupt image");
  };
  absl::StatusOr<EmbeddingCache::Pinned> a = absl::UnknownError("unset"), b = a;
  std::thread ta([&] { a = cache.GetOrCompute("bad", milliseconds(0), failing); });
  while (cache.stats().computes < 1) std::this_thread::sleep_for(milliseconds(1));
  std::thread tb([&] { b = cache.GetOrCompute("bad", milliseconds(0), failing); });
  while (cache.stats().joined < 1) std::this_thread::sleep_for(milliseconds(1));
  release_tower.Notify();
  ta.join();
  tb.join();
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_EQ(cache.stats().leases, 0u);
  // The next request tries again.
  auto again = cache.GetOrCompute("bad", milliseconds(0), [] { return absl::StatusOr<Embedding>(Rows(1, 1, 0)); });
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(computes.load(), 1);
  EXPECT_EQ(cache.stats().computes, 2u);
}

TEST(EmbeddingCacheTest, EvictsTheLeastRecentlyUsedUnpinnedEntryToStayWithinBytes) {
  FakeClock clock;
  const std::size_t entry_bytes = 4 * 4 * sizeof(float);
  EmbeddingCache cache(Options(clock, 2 * entry_bytes));
  auto make = [](float v) { return [v]() -> absl::StatusOr<Embedding> { return Rows(4, 4, v); }; };
  for (const char* key : {"a", "b"}) {
    auto p = cache.GetOrCompute(key, milliseconds(0), make(1));
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE(cache.Release(p->lease_id));
  }
  auto touch = cache.Pin("a", milliseconds(0));  // "a" is now the most recent
  ASSERT_TRUE(touch.ok());
  ASSERT_TRUE(cache.Release(touch->lease_id));
  auto c = cache.GetOrCompute("c", milliseconds(0), make(3));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(cache.Pin("a", milliseconds(0)).ok());
  EXPECT_EQ(cache.Pin("b", milliseconds(0)).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_LE(cache.stats().bytes_held, 2 * entry_bytes);
}

TEST(EmbeddingCacheTest, PinnedRowsAreNeverEvictedAndAFullCacheRefusesUntilLeasesEnd) {
  FakeClock clock;
  const std::size_t entry_bytes = 8 * sizeof(float);
  EmbeddingCache cache(Options(clock, 2 * entry_bytes));
  auto make = []() -> absl::StatusOr<Embedding> { return Rows(2, 4, 1); };
  auto a = cache.GetOrCompute("a", milliseconds(1000), make);
  auto b = cache.GetOrCompute("b", milliseconds(3000), make);
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = cache.GetOrCompute("c", milliseconds(0), make);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(cache.stats().refused_full, 1u);
  // The pinned rows are intact.
  auto leased = cache.Leased(a->lease_id);
  ASSERT_TRUE(leased.ok());
  EXPECT_EQ((*leased)->data, std::vector<float>(8, 1.0f));
  // a's lease runs out: its entry may go, and c fits.
  clock.t += milliseconds(1001);
  c = cache.GetOrCompute("c", milliseconds(0), make);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(cache.Pin("a", milliseconds(0)).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(cache.Leased(b->lease_id).ok());
}

TEST(EmbeddingCacheTest, LeasesEndByReleaseOrExpiryAndLeaveNothingPinned) {
  FakeClock clock;
  EmbeddingCache cache(Options(clock, 1 << 20));
  auto make = []() -> absl::StatusOr<Embedding> { return Rows(1, 4, 2); };
  auto released = cache.GetOrCompute("k", milliseconds(0), make);
  auto expiring = cache.Pin("k", milliseconds(100000));  // capped at max_lease (5 s)
  ASSERT_TRUE(released.ok() && expiring.ok());
  EXPECT_EQ(cache.stats().pinned_entries, 1u);
  EXPECT_TRUE(cache.Release(released->lease_id));
  EXPECT_FALSE(cache.Release(released->lease_id));
  EXPECT_FALSE(cache.Release("never-issued"));
  EXPECT_EQ(cache.stats().pinned_entries, 1u);
  clock.t += milliseconds(4999);
  EXPECT_TRUE(cache.Leased(expiring->lease_id).ok());
  clock.t += milliseconds(2);
  EXPECT_EQ(cache.Leased(expiring->lease_id).status().code(), absl::StatusCode::kNotFound);
  const auto s = cache.stats();
  EXPECT_EQ(s.leases, 0u);
  EXPECT_EQ(s.pinned_entries, 0u);
  EXPECT_EQ(s.leases_expired, 1u);
  EXPECT_EQ(s.entries, 1u);  // still cached, just unpinned
}

TEST(EmbeddingCacheTest, AnEmbeddingLargerThanTheWholeCacheIsRefused) {
  FakeClock clock;
  EmbeddingCache cache(Options(clock, 16));
  auto big = cache.GetOrCompute("big", milliseconds(0),
                                []() -> absl::StatusOr<Embedding> { return Rows(4, 4, 0); });
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(cache.stats().bytes_held, 0u);
}

}  // namespace
}  // namespace tandem::encoder
