#include "tandem/transport/ucx_agent.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::transport {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kBlockBytes = 16 * 1024;
constexpr int kBlocks = 8;

// The receiver's side of a handoff: a KV-like pool plus one 8-byte flag per block.
struct Receiver {
  std::vector<std::uint8_t> pool = std::vector<std::uint8_t>(kBlockBytes * kBlocks, 0);
  std::vector<std::uint64_t> flags = std::vector<std::uint64_t>(kBlocks, 0);
  std::unique_ptr<MemoryRegistration> pool_reg;
  std::unique_ptr<MemoryRegistration> flag_reg;
};

GatedWrite MakeWrite(const TransferAgent& receiver_agent, const Receiver& r,
                     const std::vector<std::uint8_t>& source, const std::vector<std::uint64_t>& flag_values,
                     const std::vector<int>& block_order) {
  GatedWrite w;
  w.peer_address = receiver_agent.local_address();
  w.regions = {r.pool_reg->descriptor(), r.flag_reg->descriptor()};
  for (int i = 0; i < kBlocks; ++i) {
    const int dst = block_order[i];
    w.data.push_back({source.data() + i * kBlockBytes, kBlockBytes, 0,
                      w.regions[0].base + dst * kBlockBytes});
    w.flags.push_back({&flag_values[i], sizeof(std::uint64_t), 1,
                       w.regions[1].base + dst * sizeof(std::uint64_t)});
  }
  return w;
}

// Peer-failure detection (which leases rely on) rules out UCX's shared-memory-only transports, so
// the cases are TCP alone and UCX's own choice ("" = default list).
class UcxAgentTest : public ::testing::TestWithParam<std::string> {};

TEST_P(UcxAgentTest, GatedWriteLandsDataBeforeFlags) {
  auto receiver_agent = CreateUcxAgent({GetParam()});
  ASSERT_TRUE(receiver_agent.ok()) << receiver_agent.status();
  auto sender_agent = CreateUcxAgent({GetParam()});
  ASSERT_TRUE(sender_agent.ok()) << sender_agent.status();

  Receiver r;
  auto pool_reg = (*receiver_agent)->RegisterMemory(r.pool.data(), r.pool.size());
  ASSERT_TRUE(pool_reg.ok()) << pool_reg.status();
  r.pool_reg = std::move(*pool_reg);
  auto flag_reg = (*receiver_agent)->RegisterMemory(r.flags.data(), r.flags.size() * 8);
  ASSERT_TRUE(flag_reg.ok()) << flag_reg.status();
  r.flag_reg = std::move(*flag_reg);

  std::vector<std::uint8_t> source(kBlockBytes * kBlocks);
  std::mt19937 rng(7);
  for (auto& b : source) b = static_cast<std::uint8_t>(rng());
  const std::vector<std::uint64_t> flag_values(kBlocks, 0xC0FFEEull);
  // Non-contiguous destination blocks, as a decode worker's free list hands them out.
  const std::vector<int> order = {5, 0, 7, 2, 1, 6, 3, 4};

  auto id = (*sender_agent)->StartGatedWrite(MakeWrite(**receiver_agent, r, source, flag_values, order));
  ASSERT_TRUE(id.ok()) << id.status();

  // The receiver checks every block the moment its flag appears: the gate means the data is
  // already complete then.
  std::atomic<bool> stop{false};
  std::atomic<int> seen{0};
  std::atomic<int> torn{0};
  std::thread receiver([&] {
    std::vector<bool> checked(kBlocks, false);
    while (!stop.load()) {
      (*receiver_agent)->Progress();
      for (int i = 0; i < kBlocks; ++i) {
        const int dst = order[i];
        if (checked[dst]) continue;
        std::atomic_ref<std::uint64_t> flag(r.flags[dst]);
        if (flag.load(std::memory_order_acquire) != 0xC0FFEEull) continue;
        if (std::memcmp(r.pool.data() + dst * kBlockBytes, source.data() + i * kBlockBytes,
                        kBlockBytes) != 0) {
          torn.fetch_add(1);
        }
        checked[dst] = true;
        seen.fetch_add(1);
      }
    }
  });

  TransferStatus status;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  do {
    status = (*sender_agent)->Poll(*id);
  } while (status.state == TransferState::kInProgress && Clock::now() < deadline);
  // Give the receiver thread time to observe the last flags.
  const auto seen_deadline = Clock::now() + std::chrono::seconds(5);
  while (seen.load() < kBlocks && Clock::now() < seen_deadline) std::this_thread::yield();
  stop = true;
  receiver.join();

  ASSERT_EQ(status.state, TransferState::kDone) << status.cause;
  EXPECT_EQ(status.bytes, kBlocks * (kBlockBytes + 8));
  EXPECT_EQ(seen.load(), kBlocks);
  EXPECT_EQ(torn.load(), 0);
  (*sender_agent)->Release(*id);
}

TEST_P(UcxAgentTest, RejectsSegmentsOutsideTheRegisteredRegion) {
  auto receiver_agent = CreateUcxAgent({GetParam()});
  auto sender_agent = CreateUcxAgent({GetParam()});
  ASSERT_TRUE(receiver_agent.ok() && sender_agent.ok());
  std::vector<std::uint8_t> buf(4096);
  auto reg = (*receiver_agent)->RegisterMemory(buf.data(), buf.size());
  ASSERT_TRUE(reg.ok());
  GatedWrite w;
  w.peer_address = (*receiver_agent)->local_address();
  w.regions = {(*reg)->descriptor()};
  std::vector<std::uint8_t> src(64);
  w.data.push_back({src.data(), src.size(), 0, w.regions[0].base + 4090});
  EXPECT_EQ((*sender_agent)->StartGatedWrite(w).status().code(), absl::StatusCode::kOutOfRange);
  w.data[0].region = 3;
  EXPECT_EQ((*sender_agent)->StartGatedWrite(w).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE((*receiver_agent)->RegisterMemory(nullptr, 10).ok());
}

TEST_P(UcxAgentTest, WriteToADeadPeerFailsInsteadOfHanging) {
  auto sender_agent = CreateUcxAgent({GetParam()});
  ASSERT_TRUE(sender_agent.ok());
  std::vector<std::uint8_t> buf(kBlockBytes);
  GatedWrite w;
  {
    auto receiver_agent = CreateUcxAgent({GetParam()});
    ASSERT_TRUE(receiver_agent.ok());
    auto reg = (*receiver_agent)->RegisterMemory(buf.data(), buf.size());
    ASSERT_TRUE(reg.ok());
    w.peer_address = (*receiver_agent)->local_address();
    w.regions = {(*reg)->descriptor()};
  }  // receiver gone: its memory is unregistered and its worker destroyed
  std::vector<std::uint8_t> src(kBlockBytes, 1);
  w.data.push_back({src.data(), src.size(), 0, w.regions[0].base});
  auto id = (*sender_agent)->StartGatedWrite(w);
  if (!id.ok()) {
    SUCCEED() << "refused up front: " << id.status();
    return;
  }
  TransferStatus status;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  do {
    status = (*sender_agent)->Poll(*id);
  } while (status.state == TransferState::kInProgress && Clock::now() < deadline);
  EXPECT_EQ(status.state, TransferState::kFailed);
  (*sender_agent)->Release(*id);
}

// Over TCP a one-sided write lands only while the receiver progresses, so a transfer that says
// Done without the receiver having progressed once did not wait for remote completion (its fence
// is not a real flush): the sender would release blocks the receiver has not read yet.
TEST(UcxAgentTcpTest, DoneWaitsForTheReceiver) {
  auto receiver_agent = CreateUcxAgent({"tcp"});
  ASSERT_TRUE(receiver_agent.ok()) << receiver_agent.status();
  auto sender_agent = CreateUcxAgent({"tcp"});
  ASSERT_TRUE(sender_agent.ok()) << sender_agent.status();
  Receiver r;
  r.pool_reg = *(*receiver_agent)->RegisterMemory(r.pool.data(), r.pool.size());
  r.flag_reg = *(*receiver_agent)->RegisterMemory(r.flags.data(), r.flags.size() * 8);
  std::vector<std::uint8_t> source(kBlockBytes * kBlocks, 0x5a);
  const std::vector<std::uint64_t> flag_values(kBlocks, 0xC0FFEEull);
  const std::vector<int> order = {0, 1, 2, 3, 4, 5, 6, 7};
  auto id = (*sender_agent)->StartGatedWrite(MakeWrite(**receiver_agent, r, source, flag_values, order));
  ASSERT_TRUE(id.ok()) << id.status();
  // 2000 polls: far more than a transfer needs once the receiver progresses (below).
  for (int i = 0; i < 2000; ++i) {
    ASSERT_EQ((*sender_agent)->Poll(*id).state, TransferState::kInProgress)
        << "after " << i << " polls, with the receiver never progressed";
  }
  TransferStatus status;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  do {
    (*receiver_agent)->Progress();
    status = (*sender_agent)->Poll(*id);
  } while (status.state == TransferState::kInProgress && Clock::now() < deadline);
  ASSERT_EQ(status.state, TransferState::kDone) << status.cause;
  for (int b = 0; b < kBlocks; ++b) {
    EXPECT_EQ(std::atomic_ref<std::uint64_t>(r.flags[b]).load(), 0xC0FFEEull);
  }
  EXPECT_EQ(std::memcmp(r.pool.data(), source.data(), source.size()), 0);
  (*sender_agent)->Release(*id);
}

INSTANTIATE_TEST_SUITE_P(Transports, UcxAgentTest, ::testing::Values("tcp", ""));

}  // namespace
}  // namespace tandem::transport
