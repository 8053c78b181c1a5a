// The kernels' work buffers kept between calls: reused call after call, never shared by two
// leases at once, grown when a larger request comes. Internal to the CPU backend, hence the
// source-relative path.
#include "runtime/scratch_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "runtime/thread_pool.h"

namespace tandem::kernels::cpu {
namespace {

TEST(ScratchPool, SequentialLeasesReuseOneBuffer) {
  ScratchPool pool;
  std::byte* first = nullptr;
  {
    const ScratchPool::Lease lease = pool.Acquire(1 << 20);
    first = lease.As<std::byte>();
    EXPECT_EQ(pool.idle_buffers(), 0u);
  }
  EXPECT_EQ(pool.idle_buffers(), 1u);
  for (std::size_t bytes : {std::size_t{1} << 20, std::size_t{4096}, std::size_t{1}}) {
    const ScratchPool::Lease lease = pool.Acquire(bytes);
    EXPECT_EQ(lease.As<std::byte>(), first) << bytes << " bytes";
  }
  EXPECT_EQ(pool.idle_buffers(), 1u);
  EXPECT_EQ(pool.idle_bytes(), std::size_t{1} << 20);
}

TEST(ScratchPool, LeasesHeldTogetherGetDistinctBuffers) {
  ScratchPool pool;
  {
    const ScratchPool::Lease a = pool.Acquire(1000);
    const ScratchPool::Lease b = pool.Acquire(1000);
    const ScratchPool::Lease c = pool.Acquire(1000);
    EXPECT_NE(a.As<std::byte>(), b.As<std::byte>());
    EXPECT_NE(a.As<std::byte>(), c.As<std::byte>());
    EXPECT_NE(b.As<std::byte>(), c.As<std::byte>());
    // Each can be written whole without touching the others.
    std::memset(a.As<std::byte>(), 1, 1000);
    std::memset(b.As<std::byte>(), 2, 1000);
    std::memset(c.As<std::byte>(), 3, 1000);
    EXPECT_EQ(a.As<std::uint8_t>()[999], 1);
    EXPECT_EQ(b.As<std::uint8_t>()[999], 2);
  }
  EXPECT_EQ(pool.idle_buffers(), 3u);
}

TEST(ScratchPool, ALargerRequestReplacesTheLargestIdleBuffer) {
  ScratchPool pool;
  { const ScratchPool::Lease lease = pool.Acquire(1 << 16); }
  {
    const ScratchPool::Lease lease = pool.Acquire(1 << 22);
    std::memset(lease.As<std::byte>(), 0, 1 << 22);  // all of it is there (ASan checks)
  }
  EXPECT_EQ(pool.idle_buffers(), 1u);
  EXPECT_EQ(pool.idle_bytes(), std::size_t{1} << 22);
}

TEST(ScratchPool, PicksTheSmallestIdleBufferThatFits) {
  ScratchPool pool;
  std::byte* small = nullptr;
  std::byte* large = nullptr;
  {
    const ScratchPool::Lease a = pool.Acquire(1 << 12);
    const ScratchPool::Lease b = pool.Acquire(1 << 20);
    small = a.As<std::byte>();
    large = b.As<std::byte>();
  }
  {
    // The large request takes the large buffer even when asked second...
    const ScratchPool::Lease a = pool.Acquire(1 << 10);
    const ScratchPool::Lease b = pool.Acquire(1 << 19);
    EXPECT_EQ(a.As<std::byte>(), small);
    EXPECT_EQ(b.As<std::byte>(), large);
  }
  // ...and first.
  const ScratchPool::Lease b = pool.Acquire(1 << 19);
  const ScratchPool::Lease a = pool.Acquire(1 << 10);
  EXPECT_EQ(b.As<std::byte>(), large);
  EXPECT_EQ(a.As<std::byte>(), small);
}

TEST(ScratchPool, BuffersAreCacheLineAligned) {
  ScratchPool pool;
  for (std::size_t bytes : {1, 3, 100, 4097, 1 << 21}) {
    const ScratchPool::Lease lease = pool.Acquire(bytes);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(lease.As<std::byte>()) % 64, 0u) << bytes;
  }
}

TEST(ScratchPool, ConcurrentCallersNeverShareABuffer) {
  ScratchPool pool;
  constexpr int kThreads = 8, kRounds = 500;
  constexpr std::size_t kBytes = 4096;
  std::vector<std::thread> threads;
  std::vector<int> corrupted(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        const ScratchPool::Lease lease = pool.Acquire(kBytes + t);
        auto* bytes = lease.As<std::uint8_t>();
        std::memset(bytes, t + 1, kBytes);
        std::this_thread::yield();
        for (std::size_t i = 0; i < kBytes; i += 64) corrupted[t] += bytes[i] != t + 1;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(corrupted[t], 0) << "thread " << t;
  EXPECT_LE(pool.idle_buffers(), static_cast<std::size_t>(kThreads));
}

TEST(ScratchPool, ALeaseMovedOutReleasesOnce) {
  ScratchPool pool;
  {
    ScratchPool::Lease a = pool.Acquire(64);
    const ScratchPool::Lease b(std::move(a));
    EXPECT_EQ(pool.idle_buffers(), 0u);
  }
  EXPECT_EQ(pool.idle_buffers(), 1u);
}

TEST(ScratchPool, EveryThreadPoolHasItsOwn) {
  ThreadPool one(2), two(2);
  EXPECT_NE(&one.scratch(), &two.scratch());
  { const ScratchPool::Lease lease = one.scratch().Acquire(128); }
  EXPECT_EQ(one.scratch().idle_buffers(), 1u);
  EXPECT_EQ(two.scratch().idle_buffers(), 0u);
}

}  // namespace
}  // namespace tandem::kernels::cpu
