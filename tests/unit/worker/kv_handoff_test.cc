// The KV handoff's two halves (KvSender on the prefill side, KvReceiver on the decode side) over
// the fault agent, whose network lands puts late and out of order: the gate's fence, the flag
// value per handoff, the flag reset on reuse and the lease are each what stops a wrong result
// here, so each of these tests fails when one of them is removed.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

#include "../engine/fake_model.h"
#include "../serving/loop_test_util.h"
#include "gtest/gtest.h"
#include "kv_handoff.h"
#include "tandem/engine/engine.h"
#include "tandem/kernels/backend.h"
#include "tandem/serving/engine_loop.h"
#include "tandem/transport/fault_agent.h"

namespace tandem::worker {
namespace {

using engine::testing::FakeModel;
using serving::testing::Collector;
using serving::testing::Greedy;
using std::chrono::milliseconds;
using transport::FaultAgent;
using transport::FaultOptions;
using Clock = std::chrono::steady_clock;

constexpr int kBlockSize = 4;

// Waits (bounded) for a condition another thread makes true.
template <typename Pred>
bool WaitFor(Pred pred, milliseconds timeout = milliseconds(5000)) {
  const auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

class KvHandoffTest : public ::testing::Test {
 protected:
  // decode_blocks: size of the decode pool (small pools make reservations reuse blocks).
  void Start(int decode_blocks = 64, FaultOptions landing = {}) {
    net_ = transport::CreateFaultNetwork();
    decode_agent_ = FaultAgent::Create(net_, landing);
    prefill_agent_ = FaultAgent::Create(net_);
    engine::EngineConfig cfg;
    cfg.block_size = kBlockSize;
    cfg.num_blocks = decode_blocks;
    auto decode = engine::Engine::Create(&decode_model_, backend_.get(), cfg);
    ASSERT_TRUE(decode.ok()) << decode.status();
    loop_ = std::make_unique<serving::EngineLoop>(std::move(*decode),
                                                  serving::EngineLoopOptions{64});
    auto receiver = KvReceiver::Create(loop_.get(), decode_agent_.get(), "decode-1");
    ASSERT_TRUE(receiver.ok()) << receiver.status();
    receiver_ = std::move(*receiver);
    cfg.num_blocks = 64;
    auto prefill = engine::Engine::Create(&prefill_model_, backend_.get(), cfg);
    ASSERT_TRUE(prefill.ok()) << prefill.status();
    prefill_ = std::move(*prefill);
    sender_ = std::make_unique<KvSender>(prefill_agent_.get(), prefill_->block_manager().storage());
  }

  void TearDown() override {
    // The receiver's threads progress the agent: it goes first.
    receiver_.reset();
    loop_.reset();
  }

  // Prefill side: computes the prompt's KV and first token, keeping the blocks held.
  std::int32_t Prefill(const std::string& id, const std::vector<std::int32_t>& prompt,
                       std::vector<std::int32_t>* blocks) {
    EXPECT_TRUE(prefill_->AddRequest(id, prompt, Greedy(1), {.hold_kv = true}).ok());
    std::int32_t first = -1;
    while (prefill_->HasPendingWork()) {
      auto outs = prefill_->Step();
      EXPECT_TRUE(outs.ok()) << outs.status();
      for (const auto& o : *outs) {
        if (!o.new_tokens.empty()) first = o.new_tokens[0];
      }
    }
    auto held = prefill_->HeldKvBlocks(id);
    EXPECT_TRUE(held.ok()) << held.status();
    *blocks = *held;
    return first;
  }

  // A reservation on the decode side and the prompt's KV computed on the prefill side.
  struct Prepared {
    v1::KvTarget target;
    std::vector<std::int32_t> held;  // prefill blocks
    std::int32_t first = -1;
  };
  Prepared ReserveAndPrefill(const std::string& id, const std::vector<std::int32_t>& prompt,
                             milliseconds lease = milliseconds(10000)) {
    Prepared p;
    auto reserved = receiver_->Reserve(id, static_cast<int>(prompt.size()), lease);
    EXPECT_TRUE(reserved.ok()) << reserved.status();
    if (reserved.ok()) p.target = *reserved;
    p.first = Prefill(id, prompt, &p.held);
    return p;
  }

  // What one engine alone generates for the prompt: the split must not change a token.
  std::vector<std::int32_t> Reference(const std::vector<std::int32_t>& prompt, int max_tokens) {
    FakeModel model;
    engine::EngineConfig cfg;
    cfg.block_size = kBlockSize;
    cfg.num_blocks = 64;
    auto e = engine::Engine::Create(&model, backend_.get(), cfg);
    EXPECT_TRUE(e.ok());
    EXPECT_TRUE((*e)->AddRequest("ref", prompt, Greedy(max_tokens), {}).ok());
    std::vector<std::int32_t> out;
    while ((*e)->HasPendingWork()) {
      auto outs = (*e)->Step();
      EXPECT_TRUE(outs.ok()) << outs.status();
      for (const auto& o : *outs) out.insert(out.end(), o.new_tokens.begin(), o.new_tokens.end());
    }
    return out;
  }

  int DecodeFreeBlocks() {
    int free = -1;
    EXPECT_TRUE(loop_
                    ->RunOnLoop([&](engine::Engine& e) {
                      free = e.stats().num_free_blocks;
                      return absl::OkStatus();
                    })
                    .ok());
    return free;
  }

  // The flag words of a reservation, read the way the receiver's poller reads them.
  static std::vector<std::uint64_t> Flags(const v1::KvTarget& t) {
    std::vector<std::uint64_t> out;
    for (const auto& b : t.blocks()) {
      out.push_back(std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(b.flag_addr()))
                        .load(std::memory_order_acquire));
    }
    return out;
  }

  // Writes `prefill_blocks` into `target` with `flag_value` on every flag except those listed
  // in `skip_flags`, as a (possibly stale or broken) prefill would; waits until it is done.
  void RawSend(const v1::KvTarget& target, const std::vector<std::int32_t>& prefill_blocks,
               std::uint64_t flag_value, std::set<int> skip_flags = {}) {
    const auto& storage = prefill_->block_manager().storage();
    const std::uint64_t block_bytes = storage.block_floats() * sizeof(float);
    transport::GatedWrite w;
    w.peer_address = target.ucx_address();
    // The receiver's whole registrations, as their descriptors would say: bounds only.
    transport::RegionDescriptor pool{0, UINT64_MAX / 2, target.blocks(0).rkey()};
    transport::RegionDescriptor flags{0, UINT64_MAX / 2, target.blocks(0).flag_rkey()};
    w.regions = {pool, flags};
    for (int i = 0; i < target.blocks_size(); ++i) {
      w.data.push_back({storage.base + prefill_blocks[i % prefill_blocks.size()] *
                                           storage.block_floats(),
                        block_bytes, 0, target.blocks(i).remote_addr()});
      if (!skip_flags.contains(i)) {
        w.flags.push_back({&flag_value, sizeof(flag_value), 1, target.blocks(i).flag_addr()});
      }
    }
    auto id = prefill_agent_->StartGatedWrite(w);
    ASSERT_TRUE(id.ok()) << id.status();
    transport::TransferStatus st;
    ASSERT_TRUE(WaitFor([&] {
      st = prefill_agent_->Poll(*id);
      return st.state != transport::TransferState::kInProgress;
    }));
    EXPECT_EQ(st.state, transport::TransferState::kDone) << st.cause;
    prefill_agent_->Release(*id);
  }

  // A sink the engine may still call after a failed expectation ended the test body: collectors
  // outlive the loop (TearDown stops it first).
  Collector& NewCollector() { return collectors_.emplace_back(); }

  std::unique_ptr<kernels::Backend> backend_ = kernels::CreateCpuBackend({1});
  std::deque<Collector> collectors_;
  FakeModel decode_model_, prefill_model_;
  std::shared_ptr<transport::FaultNetwork> net_;
  std::unique_ptr<FaultAgent> decode_agent_, prefill_agent_;
  std::unique_ptr<serving::EngineLoop> loop_;
  std::unique_ptr<KvReceiver> receiver_;
  std::unique_ptr<engine::Engine> prefill_;
  std::unique_ptr<KvSender> sender_;
};

TEST(HandoffFlagValueTest, NeverZeroAndDistinctPerHandoff) {
  std::set<std::uint64_t> seen;
  for (int i = 1; i <= 1000; ++i) {
    const std::uint64_t v = HandoffFlagValue("decode-1/" + std::to_string(i));
    EXPECT_NE(v, 0u);  // 0 is what a flag holds before its block arrived
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 1000u);
  EXPECT_EQ(HandoffFlagValue("decode-1/7"), HandoffFlagValue("decode-1/7"));
}

// Sender and receiver end to end, on networks that land puts in every order. At the instant a
// flag lands, the receiver's copy of its block must already equal the prefill's block, and the
// decode must produce exactly what one engine does.
class KvHandoffLandingTest : public KvHandoffTest,
                             public ::testing::WithParamInterface<FaultOptions::Landing> {};

TEST_P(KvHandoffLandingTest, BlocksLandBeforeTheirFlagsAndDecodeMatchesOneEngine) {
  FaultOptions landing;
  landing.landing = GetParam();
  landing.seed = 3;
  Start(64, landing);
  const std::vector<std::vector<std::int32_t>> prompts = {
      {5, 9, 13, 2, 8, 31, 4, 4, 17, 22, 3}, {7, 7, 7, 7}, {11}};
  std::mutex mu;
  v1::KvTarget target;                  // the handoff being sent
  std::vector<std::int32_t> blocks;     // its prefill blocks
  int flags_landed = 0, torn = 0;
  const auto& src = prefill_->block_manager().storage();
  const std::size_t block_bytes = src.block_floats() * sizeof(float);
  decode_agent_->SetLandingObserver([&](const transport::Landing& l) {
    std::lock_guard<std::mutex> lock(mu);
    for (int i = 0; i < target.blocks_size(); ++i) {
      if (target.blocks(i).flag_addr() != l.remote_addr) continue;
      ++flags_landed;
      if (std::memcmp(reinterpret_cast<const void*>(
                          static_cast<std::uintptr_t>(target.blocks(i).remote_addr())),
                      src.base + blocks[i] * src.block_floats(), block_bytes) != 0) {
        ++torn;
      }
    }
  });
  int n = 0, total_blocks = 0;
  for (const auto& prompt : prompts) {
    SCOPED_TRACE(n);
    const std::string id = "r" + std::to_string(n++);
    auto reserved = receiver_->Reserve(id, static_cast<int>(prompt.size()), milliseconds(10000));
    ASSERT_TRUE(reserved.ok()) << reserved.status();
    std::vector<std::int32_t> held;
    const std::int32_t first = Prefill(id, prompt, &held);
    {
      std::lock_guard<std::mutex> lock(mu);
      target = *reserved;
      blocks = held;
    }
    total_blocks += reserved->blocks_size();
    auto sent = sender_->Send(*reserved, held, Clock::now() + std::chrono::seconds(10));
    ASSERT_TRUE(sent.ok()) << sent.status();
    EXPECT_EQ(sent->bytes, held.size() * (block_bytes + sizeof(std::uint64_t)));
    ASSERT_TRUE(prefill_->ReleaseHeldKv(id).ok());
    Collector& c = NewCollector();
    ASSERT_TRUE(receiver_
                    ->Commit(reserved->handoff_id(), id, prompt, first, Greedy(8),
                             kv::TrafficClass::kChat, c.sink())
                    .ok());
    ASSERT_TRUE(c.WaitFinished());
    EXPECT_TRUE(c.last().error.empty()) << c.last().error;
    std::vector<std::int32_t> got = {first};
    const auto rest = c.tokens();
    got.insert(got.end(), rest.begin(), rest.end());
    EXPECT_EQ(got, Reference(prompt, 8));
  }
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(flags_landed, total_blocks);
  EXPECT_EQ(torn, 0) << "a flag landed before its block's data: the gate's fence is missing";
  EXPECT_EQ(receiver_->stats().completed_total, 3);
  EXPECT_EQ(receiver_->stats().reserved_blocks, 0);
}

INSTANTIATE_TEST_SUITE_P(Landings, KvHandoffLandingTest,
                         ::testing::Values(FaultOptions::Landing::kInOrder,
                                           FaultOptions::Landing::kNewestFirst,
                                           FaultOptions::Landing::kShuffled));

TEST_F(KvHandoffTest, SenderWritesTheHandoffsFlagValueOnEveryBlock) {
  Start();
  const Prepared p = ReserveAndPrefill("a", {3, 1, 4, 1, 5, 9, 2, 6, 5});
  const v1::KvTarget* reserved = &p.target;
  const std::vector<std::int32_t>& held = p.held;
  EXPECT_EQ(Flags(*reserved), std::vector<std::uint64_t>(3, 0));
  ASSERT_TRUE(sender_->Send(*reserved, held, Clock::now() + std::chrono::seconds(10)).ok());
  EXPECT_EQ(Flags(*reserved),
            std::vector<std::uint64_t>(3, HandoffFlagValue(reserved->handoff_id())));
  receiver_->Abandon("a");
}

// Some flags never arrive (a prefill that died between flag writes): the blocks never reach
// the engine, and the lease gives them back.
TEST_F(KvHandoffTest, PartialFlagsNeverCommit) {
  Start();
  const int free_before = DecodeFreeBlocks();
  const std::vector<std::int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8};  // 3 blocks
  for (int missing : {0, 1, 2}) {
    SCOPED_TRACE(missing);
    const std::string id = "p" + std::to_string(missing);
    const Prepared p = ReserveAndPrefill(id, prompt, milliseconds(300));
    const v1::KvTarget* reserved = &p.target;
    const std::int32_t first = p.first;
    RawSend(*reserved, p.held, HandoffFlagValue(reserved->handoff_id()), {missing});
    ASSERT_TRUE(prefill_->ReleaseHeldKv(id).ok());
    Collector& c = NewCollector();
    const absl::Status st = receiver_->Commit(reserved->handoff_id(), id, prompt, first,
                                              Greedy(4), kv::TrafficClass::kChat, c.sink());
    EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  }
  EXPECT_EQ(receiver_->stats().completed_total, 0);
  EXPECT_EQ(receiver_->stats().reserved_blocks, 0);
  EXPECT_EQ(DecodeFreeBlocks(), free_before);
}

// A prefill whose handoff expired writes late, with its own flag value, into blocks that now
// belong to another handoff: that handoff must not look complete.
TEST_F(KvHandoffTest, StaleHandoffsFlagsOnReusedBlocksNeverCommit) {
  Start(/*decode_blocks=*/4);  // a reservation of the whole pool: the next one reuses every block
  const std::vector<std::int32_t> prompt(4 * kBlockSize - 1, 9);
  auto stale = receiver_->Reserve("old", static_cast<int>(prompt.size()), milliseconds(50));
  ASSERT_TRUE(stale.ok()) << stale.status();
  ASSERT_TRUE(WaitFor([&] { return receiver_->stats().expired_total == 1; }))
      << "the lease never expired";
  ASSERT_TRUE(WaitFor([&] { return DecodeFreeBlocks() == 4; }));
  auto fresh = receiver_->Reserve("new", static_cast<int>(prompt.size()), milliseconds(400));
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  std::set<std::uint64_t> stale_addrs, fresh_addrs;
  for (const auto& b : stale->blocks()) stale_addrs.insert(b.flag_addr());
  for (const auto& b : fresh->blocks()) fresh_addrs.insert(b.flag_addr());
  ASSERT_EQ(stale_addrs, fresh_addrs) << "the test needs the new handoff on the same blocks";

  std::vector<std::int32_t> held;
  const std::int32_t first = Prefill("old", prompt, &held);
  RawSend(*stale, held, HandoffFlagValue(stale->handoff_id()));  // lands on the new handoff
  EXPECT_EQ(Flags(*fresh), std::vector<std::uint64_t>(4, HandoffFlagValue(stale->handoff_id())));

  Collector& c = NewCollector();
  EXPECT_EQ(receiver_->Commit(fresh->handoff_id(), "new", prompt, first, Greedy(2),
                              kv::TrafficClass::kChat, c.sink())
                .code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(receiver_->Commit(stale->handoff_id(), "old", prompt, first, Greedy(2),
                              kv::TrafficClass::kChat, c.sink())
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(receiver_->stats().completed_total, 0);
  ASSERT_TRUE(prefill_->ReleaseHeldKv("old").ok());
}

// A block's flag from its last handoff is cleared before the block is handed out again, so only
// a write of the new handoff can set it.
TEST_F(KvHandoffTest, ReservingReusedBlocksResetsTheirFlags) {
  Start(/*decode_blocks=*/4);
  const std::vector<std::int32_t> prompt(4 * kBlockSize, 6);
  auto first_use = receiver_->Reserve("a", static_cast<int>(prompt.size()), milliseconds(10000));
  ASSERT_TRUE(first_use.ok()) << first_use.status();
  std::vector<std::int32_t> held;
  Prefill("a", prompt, &held);
  ASSERT_TRUE(sender_->Send(*first_use, held, Clock::now() + std::chrono::seconds(10)).ok());
  ASSERT_EQ(Flags(*first_use),
            std::vector<std::uint64_t>(4, HandoffFlagValue(first_use->handoff_id())));
  receiver_->Abandon("a");
  auto second_use = receiver_->Reserve("b", static_cast<int>(prompt.size()), milliseconds(10000));
  ASSERT_TRUE(second_use.ok()) << second_use.status();
  EXPECT_EQ(Flags(*second_use), std::vector<std::uint64_t>(4, 0));
  receiver_->Abandon("b");
  ASSERT_TRUE(prefill_->ReleaseHeldKv("a").ok());
}

TEST_F(KvHandoffTest, LeaseExpiryGivesTheBlocksBack) {
  Start();
  const int free_before = DecodeFreeBlocks();
  auto reserved = receiver_->Reserve("orphan", 10, milliseconds(100));
  ASSERT_TRUE(reserved.ok());
  EXPECT_EQ(reserved->lease_ms(), 100u);
  EXPECT_EQ(receiver_->stats().reserved_blocks, 3);
  EXPECT_EQ(receiver_->stats().active_handoffs, 1);
  EXPECT_EQ(DecodeFreeBlocks(), free_before - 3);
  ASSERT_TRUE(WaitFor([&] { return receiver_->stats().expired_total == 1; }))
      << "the lease never expired";
  EXPECT_EQ(receiver_->stats().reserved_blocks, 0);
  EXPECT_EQ(receiver_->stats().active_handoffs, 0);
  EXPECT_TRUE(WaitFor([&] { return DecodeFreeBlocks() == free_before; }));
  Collector& c = NewCollector();
  EXPECT_EQ(receiver_->Commit(reserved->handoff_id(), "orphan", std::vector<std::int32_t>(10, 1),
                              5, Greedy(2), kv::TrafficClass::kChat, c.sink())
                .code(),
            absl::StatusCode::kNotFound);
  // The request id is free again.
  EXPECT_TRUE(receiver_->Reserve("orphan", 10, milliseconds(1000)).ok());
}

// Abandon (the router cancelled: client gone, prefill failed) gives the engine place and the
// request id back at once, but the blocks only when no write can land in them any more: here no
// sender ever wrote, so at the end of the lease.
TEST_F(KvHandoffTest, AbandonGivesThePlaceBackAtOnceAndTheBlocksAfterTheLease) {
  Start();
  const int free_before = DecodeFreeBlocks();
  auto reserved = receiver_->Reserve("x", 20, milliseconds(300));
  ASSERT_TRUE(reserved.ok());
  EXPECT_EQ(DecodeFreeBlocks(), free_before - 5);
  receiver_->Abandon("x");
  receiver_->Abandon("never-reserved");  // ignored
  EXPECT_EQ(receiver_->stats().active_handoffs, 0);
  EXPECT_EQ(receiver_->stats().quarantined_blocks, 5);
  EXPECT_EQ(DecodeFreeBlocks(), free_before - 5) << "blocks a sender may still write were freed";
  Collector& c = NewCollector();
  EXPECT_EQ(receiver_->Commit(reserved->handoff_id(), "x", std::vector<std::int32_t>(20, 1), 5,
                              Greedy(2), kv::TrafficClass::kChat, c.sink())
                .code(),
            absl::StatusCode::kNotFound);
  auto again = receiver_->Reserve("x", 4, milliseconds(300));  // the id is free again
  ASSERT_TRUE(again.ok()) << again.status();
  receiver_->Abandon("x");
  EXPECT_EQ(receiver_->stats().reserved_blocks, 0);
  EXPECT_TRUE(WaitFor([&] { return DecodeFreeBlocks() == free_before; }));
  EXPECT_EQ(receiver_->stats().quarantined_blocks, 0);
  EXPECT_EQ(receiver_->stats().expired_total, 0);
}

// A Cancel that overtook its ReserveKv (the router cut the call in flight): the reservation that
// arrives after it is refused and holds nothing, instead of holding its blocks and an engine
// place until its lease runs out (which held decode drains to their deadline). Ids are one-shot:
// a later reservation under the same id is served.
TEST_F(KvHandoffTest, AReservationArrivingAfterItsCancelIsRefusedAndHoldsNothing) {
  Start();
  const int free_before = DecodeFreeBlocks();
  receiver_->Abandon("overtaken");
  auto late = receiver_->Reserve("overtaken", 20, milliseconds(30000));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kAborted) << late.status();
  EXPECT_EQ(receiver_->stats().active_handoffs, 0);
  EXPECT_EQ(receiver_->stats().reserved_blocks, 0);
  EXPECT_TRUE(WaitFor([&] { return DecodeFreeBlocks() == free_before; }));
  auto retry = receiver_->Reserve("overtaken", 4, milliseconds(30000));
  ASSERT_TRUE(retry.ok()) << retry.status();
  receiver_->Abandon("overtaken");
}

// The race the soak test found: a client leaves while its prompt is being prefilled; the router
// cancels the reservation, and the prefill worker, not told yet, writes the KV anyway. Had the
// blocks gone back at once, the next reservation would hold them when the late writes land: its
// KV overwritten, its flags set to the old handoff's value (its Commit then waits out the lease
// and fails). Quarantined, they are handed out again only after the late sender's flags show it
// is done, and then with their flags reset.
TEST_F(KvHandoffTest, AnAbandonedHandoffsLateWritesNeverReachTheNextReservation) {
  Start(/*decode_blocks=*/4);  // the whole pool: a new reservation could only reuse these blocks
  const std::vector<std::int32_t> prompt(4 * kBlockSize - 1, 9);
  const Prepared old = ReserveAndPrefill("old", prompt, milliseconds(30000));
  receiver_->Abandon("old");
  EXPECT_EQ(receiver_->Reserve("new", static_cast<int>(prompt.size()), milliseconds(30000))
                .status()
                .code(),
            absl::StatusCode::kResourceExhausted)
      << "the abandoned handoff's blocks were handed out while its sender may still write";
  // The late sender finishes: every flag shows its value, nothing more can land.
  ASSERT_TRUE(sender_->Send(old.target, old.held, Clock::now() + std::chrono::seconds(10)).ok());
  ASSERT_TRUE(prefill_->ReleaseHeldKv("old").ok());
  ASSERT_TRUE(WaitFor([&] { return DecodeFreeBlocks() == 4; })) << "quarantine never ended";
  auto fresh = receiver_->Reserve("new", static_cast<int>(prompt.size()), milliseconds(30000));
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(Flags(*fresh), std::vector<std::uint64_t>(4, 0));
  receiver_->Abandon("new");
}

TEST_F(KvHandoffTest, ReserveAndCommitRefuseWhatTheyCannotHonour) {
  Start(/*decode_blocks=*/8);
  EXPECT_EQ(receiver_->Reserve("", 4, milliseconds(100)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(receiver_->Reserve("z", 0, milliseconds(100)).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto a = receiver_->Reserve("a", 4, milliseconds(10000));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(receiver_->Reserve("a", 4, milliseconds(10000)).status().code(),
            absl::StatusCode::kAlreadyExists);
  // More than the pool holds now, and more than it could ever hold.
  EXPECT_EQ(receiver_->Reserve("b", 8 * kBlockSize, milliseconds(100)).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(receiver_->Reserve("c", 9 * kBlockSize, milliseconds(100)).status().code(),
            absl::StatusCode::kInvalidArgument);
  Collector& c = NewCollector();
  EXPECT_EQ(receiver_->Commit(a->handoff_id(), "someone-else", {1, 2, 3, 4}, 5, Greedy(2),
                              kv::TrafficClass::kChat, c.sink())
                .code(),
            absl::StatusCode::kInvalidArgument);
  // The prompt needs two blocks, the reservation has one: refused, and the blocks go back.
  EXPECT_EQ(receiver_->Commit(a->handoff_id(), "a", {1, 2, 3, 4, 5}, 5, Greedy(2),
                              kv::TrafficClass::kChat, c.sink())
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(receiver_->stats().reserved_blocks, 0);
  EXPECT_EQ(DecodeFreeBlocks(), 8);
}

TEST_F(KvHandoffTest, SenderRefusesTargetsThatDoNotFit) {
  Start();
  const Prepared p = ReserveAndPrefill("s", {1, 2, 3, 4, 5});
  const v1::KvTarget* reserved = &p.target;
  const std::vector<std::int32_t>& held = p.held;
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  v1::KvTarget t = *reserved;
  t.set_block_bytes(t.block_bytes() * 2);  // another model or block size
  EXPECT_EQ(sender_->Send(t, held, deadline).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(sender_->Send(*reserved, {held[0]}, deadline).status().code(),
            absl::StatusCode::kInvalidArgument);
  t = *reserved;
  t.mutable_blocks(0)->clear_flag_rkey();
  EXPECT_EQ(sender_->Send(t, held, deadline).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(decode_agent_->pending_puts(), 0u);  // nothing was written
  EXPECT_EQ(Flags(*reserved), std::vector<std::uint64_t>(2, 0));
  receiver_->Abandon("s");
  ASSERT_TRUE(prefill_->ReleaseHeldKv("s").ok());
}

TEST_F(KvHandoffTest, SenderFailsWhenTheLinkDropsItsWrites) {
  Start();
  const Prepared p = ReserveAndPrefill("d", {1, 2, 3, 4, 5});
  const v1::KvTarget* reserved = &p.target;
  const std::vector<std::int32_t>& held = p.held;
  decode_agent_->SetDropPuts(true);
  auto sent = sender_->Send(*reserved, held, Clock::now() + std::chrono::seconds(5));
  EXPECT_EQ(sent.status().code(), absl::StatusCode::kUnavailable) << sent.status();
  EXPECT_EQ(Flags(*reserved), std::vector<std::uint64_t>(2, 0));
  receiver_->Abandon("d");
  ASSERT_TRUE(prefill_->ReleaseHeldKv("d").ok());
}

// A receiver that never progresses (hung, or its progress thread stalled): the send gives up at
// its deadline instead of holding the prefill's blocks forever.
TEST_F(KvHandoffTest, SenderGivesUpAtItsDeadline) {
  Start();
  auto silent = FaultAgent::Create(net_);
  std::vector<float> pool(4096), flags(64);
  auto pool_reg = *silent->RegisterMemory(pool.data(), pool.size() * sizeof(float));
  auto flag_reg = *silent->RegisterMemory(flags.data(), flags.size() * sizeof(float));
  const std::vector<std::int32_t> prompt = {1, 2, 3};
  std::vector<std::int32_t> held;
  Prefill("t", prompt, &held);
  v1::KvTarget t;
  t.set_ucx_address(silent->local_address());
  t.set_handoff_id("silent/1");
  t.set_block_bytes(prefill_->block_manager().storage().block_floats() * sizeof(float));
  auto* b = t.add_blocks();
  b->set_remote_addr(pool_reg->descriptor().base);
  b->set_flag_addr(flag_reg->descriptor().base);
  b->set_rkey(pool_reg->descriptor().remote_key);
  b->set_flag_rkey(flag_reg->descriptor().remote_key);
  const auto start = Clock::now();
  auto sent = sender_->Send(t, held, start + milliseconds(100));
  EXPECT_EQ(sent.status().code(), absl::StatusCode::kDeadlineExceeded) << sent.status();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(silent->pending_puts(), 0u);  // the abandoned writes never land
  ASSERT_TRUE(prefill_->ReleaseHeldKv("t").ok());
}

}  // namespace
}  // namespace tandem::worker
