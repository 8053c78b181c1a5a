// The data-then-flag gate (GateSequencer, the code UCX runs too) over a network that delivers
// late and out of order. Loopback TCP lands puts in issue order, so there a gated write without
// its fence still looks right; here its flags land first and these tests fail.
#include <atomic>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tandem/transport/fault_agent.h"

namespace tandem::transport {
namespace {

constexpr std::size_t kBlockBytes = 4096;
constexpr int kBlocks = 6;
constexpr std::uint64_t kFlag = 0xF1A6ull;

struct Receiver {
  std::unique_ptr<FaultAgent> agent;
  std::vector<std::uint8_t> pool = std::vector<std::uint8_t>(kBlockBytes * kBlocks, 0);
  std::vector<std::uint64_t> flags = std::vector<std::uint64_t>(kBlocks, 0);
  std::unique_ptr<MemoryRegistration> pool_reg, flag_reg;

  Receiver(std::shared_ptr<FaultNetwork> net, FaultOptions options)
      : agent(FaultAgent::Create(std::move(net), options)) {
    pool_reg = *agent->RegisterMemory(pool.data(), pool.size());
    flag_reg = *agent->RegisterMemory(flags.data(), flags.size() * sizeof(std::uint64_t));
  }
  std::uint64_t flag(int b) const {
    return std::atomic_ref<const std::uint64_t>(flags[b]).load(std::memory_order_acquire);
  }
};

struct Source {
  std::vector<std::uint8_t> bytes = std::vector<std::uint8_t>(kBlockBytes * kBlocks);
  std::uint64_t flag_value = kFlag;
  Source() {
    std::mt19937 rng(11);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng() | 1);  // never 0: 0 is "not yet"
  }
};

// Block i of the source goes to receiver block order[i] (non-contiguous, as a free list gives).
const std::vector<int> kOrder = {3, 0, 5, 1, 4, 2};

GatedWrite MakeWrite(const Receiver& r, const Source& src) {
  GatedWrite w;
  w.peer_address = r.agent->local_address();
  w.regions = {r.pool_reg->descriptor(), r.flag_reg->descriptor()};
  for (int i = 0; i < kBlocks; ++i) {
    w.data.push_back({src.bytes.data() + i * kBlockBytes, kBlockBytes, 0,
                      w.regions[0].base + kOrder[i] * kBlockBytes});
    w.flags.push_back({&src.flag_value, sizeof(std::uint64_t), 1,
                       w.regions[1].base + kOrder[i] * sizeof(std::uint64_t)});
  }
  return w;
}

std::string LandingName(FaultOptions::Landing l) {
  switch (l) {
    case FaultOptions::Landing::kInOrder:
      return "InOrder";
    case FaultOptions::Landing::kNewestFirst:
      return "NewestFirst";
    case FaultOptions::Landing::kShuffled:
      return "Shuffled";
  }
  return "?";
}

class GateTest : public ::testing::TestWithParam<std::tuple<FaultOptions::Landing, int>> {
 protected:
  FaultOptions Options() const {
    FaultOptions o;
    o.landing = std::get<0>(GetParam());
    o.puts_per_progress = std::get<1>(GetParam());
    o.seed = 5;
    return o;
  }
};

// The receiver checks a block the instant its flag lands (from inside the network): its bytes
// must all be there already.
TEST_P(GateTest, NoFlagLandsBeforeItsBlock) {
  auto net = CreateFaultNetwork();
  Receiver r(net, Options());
  auto sender = FaultAgent::Create(net);
  Source src;
  int flags_seen = 0, torn = 0;
  const auto flag_base = r.flag_reg->descriptor().base;
  r.agent->SetLandingObserver([&](const Landing& l) {
    if (l.bytes != sizeof(std::uint64_t)) return;
    const int dst = static_cast<int>((l.remote_addr - flag_base) / sizeof(std::uint64_t));
    const int i = static_cast<int>(std::find(kOrder.begin(), kOrder.end(), dst) - kOrder.begin());
    ++flags_seen;
    if (std::memcmp(r.pool.data() + dst * kBlockBytes, src.bytes.data() + i * kBlockBytes,
                    kBlockBytes) != 0) {
      ++torn;
    }
  });
  auto id = sender->StartGatedWrite(MakeWrite(r, src));
  ASSERT_TRUE(id.ok()) << id.status();
  TransferStatus st;
  // Each round: the sender polls, the receiver lands a few puts. Bounded: 2 puts per block.
  for (int round = 0; round < 1000; ++round) {
    st = sender->Poll(*id);
    if (st.state != TransferState::kInProgress) break;
    r.agent->Progress();
  }
  ASSERT_EQ(st.state, TransferState::kDone) << st.cause;
  EXPECT_EQ(st.bytes, kBlocks * (kBlockBytes + sizeof(std::uint64_t)));
  EXPECT_EQ(flags_seen, kBlocks);
  EXPECT_EQ(torn, 0) << "flags landed before their blocks' data: the gate's fence is missing";
  for (int i = 0; i < kBlocks; ++i) {
    EXPECT_EQ(r.flag(kOrder[i]), kFlag);
    EXPECT_EQ(std::memcmp(r.pool.data() + kOrder[i] * kBlockBytes,
                          src.bytes.data() + i * kBlockBytes, kBlockBytes),
              0);
  }
  sender->Release(*id);
}

// However long the sender polls, no flag is even issued while a data put has not landed.
TEST_P(GateTest, FlagsWaitForEveryDataPut) {
  auto net = CreateFaultNetwork();
  FaultOptions one_at_a_time = Options();
  one_at_a_time.puts_per_progress = 1;  // to stop with exactly one data put missing
  Receiver r(net, one_at_a_time);
  auto sender = FaultAgent::Create(net);
  Source src;
  auto id = sender->StartGatedWrite(MakeWrite(r, src));
  ASSERT_TRUE(id.ok());
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(sender->Poll(*id).state, TransferState::kInProgress);
  }
  EXPECT_EQ(r.agent->pending_puts(), static_cast<std::size_t>(kBlocks)) << "flags went out early";
  // Land all but one data put: still no flag.
  while (r.agent->pending_puts() > 1) r.agent->Progress();
  for (int i = 0; i < 100; ++i) sender->Poll(*id);
  EXPECT_EQ(r.agent->pending_puts(), 1u);
  for (int b = 0; b < kBlocks; ++b) EXPECT_EQ(r.flag(b), 0u);
  sender->Release(*id);
}

INSTANTIATE_TEST_SUITE_P(
    Landings, GateTest,
    ::testing::Combine(::testing::Values(FaultOptions::Landing::kInOrder,
                                         FaultOptions::Landing::kNewestFirst,
                                         FaultOptions::Landing::kShuffled),
                       ::testing::Values(1, 3)),
    [](const auto& info) {
      return LandingName(std::get<0>(info.param)) + "_" + std::to_string(std::get<1>(info.param));
    });

// One gated write from a fresh sender to a fresh receiver (default landing: newest first).
class FaultAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    id_ = sender_->StartGatedWrite(MakeWrite(*r_, src_));
    ASSERT_TRUE(id_.ok()) << id_.status();
  }
  void TearDown() override { sender_->Release(id_.value_or(0)); }

  std::shared_ptr<FaultNetwork> net_ = CreateFaultNetwork();
  std::unique_ptr<Receiver> r_ = std::make_unique<Receiver>(net_, FaultOptions{});
  std::unique_ptr<FaultAgent> sender_ = FaultAgent::Create(net_);
  Source src_;
  absl::StatusOr<TransferId> id_;
};

// Done means the flags landed, not merely that they left: a sender may release its blocks then.
TEST_F(FaultAgentTest, DoneOnlyOnceTheFlagsLanded) {
  while (r_->agent->pending_puts() > 0) r_->agent->Progress();  // the data
  EXPECT_EQ(sender_->Poll(*id_).state, TransferState::kInProgress);  // issues the flags
  ASSERT_EQ(r_->agent->pending_puts(), static_cast<std::size_t>(kBlocks));
  while (r_->agent->pending_puts() > 1) r_->agent->Progress();
  EXPECT_EQ(sender_->Poll(*id_).state, TransferState::kInProgress);
  r_->agent->Progress();
  EXPECT_EQ(sender_->Poll(*id_).state, TransferState::kDone);
}

TEST_F(FaultAgentTest, DroppedPutsFailTheTransfer) {
  r_->agent->Progress();
  r_->agent->SetDropPuts(true);
  const TransferStatus st = sender_->Poll(*id_);
  EXPECT_EQ(st.state, TransferState::kFailed);
  EXPECT_EQ(st.cause.code(), absl::StatusCode::kUnavailable) << st.cause;
  for (int b = 0; b < kBlocks; ++b) EXPECT_EQ(r_->flag(b), 0u);
}

TEST_F(FaultAgentTest, ReceiverGoneFailsTheTransfer) {
  r_.reset();
  EXPECT_EQ(sender_->Poll(*id_).state, TransferState::kFailed);
}

TEST_F(FaultAgentTest, ReleasedTransfersNeverLand) {
  sender_->Release(*id_);
  EXPECT_EQ(r_->agent->pending_puts(), 0u);
  r_->agent->Progress();
  EXPECT_EQ(sender_->Poll(*id_).state, TransferState::kFailed);  // unknown id
  for (std::uint8_t b : r_->pool) ASSERT_EQ(b, 0);
}

TEST(FaultAgentValidationTest, RejectsUnregisteredAndOutOfRangeTargets) {
  auto net = CreateFaultNetwork();
  Receiver r(net, {});
  auto sender = FaultAgent::Create(net);
  Source src;
  GatedWrite w = MakeWrite(r, src);
  w.data[0].remote_addr = w.regions[0].base + w.regions[0].length - 8;
  EXPECT_EQ(sender->StartGatedWrite(w).status().code(), absl::StatusCode::kOutOfRange);
  w = MakeWrite(r, src);
  r.pool_reg.reset();  // unregistered: the receiver's key is no longer valid
  auto id = sender->StartGatedWrite(w);
  ASSERT_TRUE(id.ok());
  const TransferStatus st = sender->Poll(*id);
  EXPECT_EQ(st.state, TransferState::kFailed);
  EXPECT_EQ(st.cause.code(), absl::StatusCode::kInvalidArgument) << st.cause;
  sender->Release(*id);
}

}  // namespace
}  // namespace tandem::transport
