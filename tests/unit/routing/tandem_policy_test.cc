#include "cluster_fixture.h"

namespace tandem::routing {
namespace {

using testing::ClusterFixture;

class TandemPolicyTest : public ClusterFixture {
 protected:
  // A 400-block prefix (chain 1) and one more block of the request's own.
  static std::vector<BlockHash> PrefixWithTail(BlockHash tail) {
    std::vector<BlockHash> chain = Chain(1, 400);
    chain.push_back(tail);
    return chain;
  }
  // A prompt routed through `policy` is evicted from worker 0 and asked for again: every eviction
  // so far paid for again (rule 4b's reused share at 100%).
  void EvictThenAskAgain(Policy& policy) {
    Route(policy, Request(Chain(6000, 10)));
    Cache(0, Chain(6000, 10));
    Evict(0, Chain(6000, 10));
    Route(policy, Request(Chain(6000, 10)));
  }
  std::unique_ptr<Policy> policy_ = MakeTandemPolicy();
};

TEST_F(TandemPolicyTest, PrefersTheCachedWorkerWhenQueuesAreEqual) {
  Build(2, 0);
  Cache(1, Chain(1, 8));
  const RouteDecision d = Route(*policy_, Request(Chain(1, 10)));
  EXPECT_EQ(d.prefill, 1);
  EXPECT_EQ(d.predicted_cached_tokens, 8 * 16);
  EXPECT_EQ(d.decode, kNoWorker);
}

TEST_F(TandemPolicyTest, LeavesTheCacheWhenItsQueueCostsMoreThanTheHitSaves) {
  Build(2, 0);
  Cache(1, Chain(1, 8));                  // saves 128 tokens
  QueuePrefill(1, 10, /*tokens=*/10000);  // ~12.5 s of queued work at the prior speed
  EXPECT_EQ(Route(*policy_, Request(Chain(1, 10))).prefill, 0);
}

TEST_F(TandemPolicyTest, KeepsALongHitDespiteAShortQueue) {
  Build(2, 0);
  Cache(1, Chain(1, 400));  // 6,400 of 6,416 tokens cached: ~0.8 s saved
  QueuePrefill(1, 1, /*tokens=*/800);  // 0.1 s queued
  EXPECT_EQ(Route(*policy_, Request(Chain(1, 401))).prefill, 1);
}

TEST_F(TandemPolicyTest, AConversationStaysUntilItsWorkerIsFarBehind) {
  // Worker 1 holds the previous turn's 6,400 tokens: 0.8 s at the prior speed, worth 20 x 0.8 =
  // 16 s of predicted TTFT. On idle worker 0 the whole prompt takes 0.822 s; on worker 1 its own
  // part takes 0.022 s after the queue: it stays while the queue is under ~16.8 s.
  TandemOptions options;
  options.history_stickiness = 20;
  Build(2, 0);
  Cache(1, Chain(1, 400));
  QueuePrefill(1, 1, /*tokens=*/120000);  // 15.02 s
  {
    auto policy = MakeTandemPolicy(options);
    Route(*policy, Request(Chain(1, 400)));  // the previous turn
    EXPECT_EQ(Route(*policy, Request(Chain(1, 401))).prefill, 1);
  }
  QueuePrefill(1, 1, /*tokens=*/16000);  // 17.04 s
  {
    auto policy = MakeTandemPolicy(options);
    Route(*policy, Request(Chain(1, 400)));
    EXPECT_EQ(Route(*policy, Request(Chain(1, 401))).prefill, 0);
  }
  // Without stickiness only this request's saving counts: 15 s of queue is not worth 0.8 s.
  options.history_stickiness = 0;
  auto plain = MakeTandemPolicy(options);
  table_.OnPrefillFinished(1, 16000, 16000 / 16 + 1, 0, 0);
  Route(*plain, Request(Chain(1, 400)));
  EXPECT_EQ(Route(*plain, Request(Chain(1, 401))).prefill, 0);
}

TEST_F(TandemPolicyTest, AHistoryIsWeighedApartFromAPrefixOthersBranchOff) {
  // Worker 1 holds 400 blocks (0.8 s of compute) and is 5.04 s behind. A prompt continuing one
  // routed earlier (its match ends at that prompt's last full block) weighs them with
  // history_stickiness (5: stays while the queue is under ~4.8 s): it moves. The same prefix
  // reached without such a prompt, or continued a second time, is one others branch off (a
  // system prompt): cache_stickiness (20: stays while under ~16.8 s).
  TandemOptions options;
  options.history_stickiness = 5;
  options.cache_stickiness = 20;
  options.shared_prefix_seconds = 0;  // no fan-out division: the two weights alone
  options.full_stickiness_reused_share = 0;  // cache_stickiness in full
  Build(2, 0);
  Cache(1, Chain(1, 400));
  QueuePrefill(1, 1, /*tokens=*/40000);  // 5.02 s
  auto continued = MakeTandemPolicy(options);
  Route(*continued, Request(Chain(1, 400)));
  EXPECT_EQ(Route(*continued, Request(Chain(1, 401))).prefill, 0);
  EXPECT_EQ(Route(*continued, Request(Chain(1, 401))).prefill, 1) << "a prompt continues once";
  auto branched = MakeTandemPolicy(options);
  EXPECT_EQ(Route(*branched, Request(Chain(1, 401))).prefill, 1);
  // A partial last block is never matched: the prompt ends at its last full block.
  auto partial = MakeTandemPolicy(options);
  RouteRequest previous = Request(Chain(1, 401));
  previous.prompt_tokens = 400 * 16 + 5;
  Route(*partial, previous);
  std::vector<BlockHash> next = Chain(1, 400);
  next.push_back(7777);
  EXPECT_EQ(Route(*partial, Request(next)).prefill, 0);
}

TEST_F(TandemPolicyTest, APrefixManyRequestsShareIsReplicatedWhereAHistoryIsNot) {
  // Worker 1 holds a 400-block prefix and is 15 s behind: with full stickiness a request continuing
  // that prefix waits there (see above). Different requests ending their match at the same block
  // (a tenant's system prompt) divide the stickiness by how many came: the third one goes to idle
  // worker 0 (20 / 2 x 0.8 s = 8 s of credit is less than the 15 s queue).
  for (double shared_prefix_seconds : {600.0, 0.0}) {
    TandemOptions options;
    options.cache_stickiness = 20;
    options.shared_prefix_seconds = shared_prefix_seconds;
    options.full_stickiness_reused_share = 0;  // in full (see the next test)
    auto policy = MakeTandemPolicy(options);
    table_ = WorkerTable();
    index_ = KvIndex(KvIndex::Options{.max_blocks = 1 << 16});
    Build(2, 0);
    Cache(1, Chain(1, 400));
    QueuePrefill(1, 1, /*tokens=*/120000);  // 15.02 s
    EXPECT_EQ(Route(*policy, Request(PrefixWithTail(9001))).prefill, 1);
    EXPECT_EQ(Route(*policy, Request(PrefixWithTail(9002))).prefill, 1);
    // Without the fan-out rule (0) every one of them stays.
    EXPECT_EQ(Route(*policy, Request(PrefixWithTail(9003))).prefill, shared_prefix_seconds > 0 ? 0 : 1)
        << shared_prefix_seconds;
  }
}

TEST_F(TandemPolicyTest, ABranchPointIsCopiedToAnIdleWorkerWhileTheCachesLoseNothingReused) {
  // Worker 1 holds a 400-block prefix (0.8 s of compute) and is 3.02 s behind; worker 0 is idle.
  // For the request alone the idle worker is faster (0.82 s against 3.04 s). Nothing evicted has
  // been asked for again: the copy displaces nothing anyone wants, so cache_stickiness is charged
  // at its floor only (0.1 x 20 x 0.8 s = 1.6 s, under the 2.22 s the copy saves): it is made.
  Build(2, 0);
  Cache(1, Chain(1, 400));
  QueuePrefill(1, 1, /*tokens=*/24000);
  auto policy = MakeTandemPolicy();
  EXPECT_EQ(Route(*policy, Request(PrefixWithTail(9001))).prefill, 0);
  // Evictions nobody asks for again change nothing.
  Cache(0, Chain(5000, 10));
  Evict(0, Chain(5000, 10));
  EXPECT_EQ(Route(*policy, Request(PrefixWithTail(9002))).prefill, 0);
  // A prompt routed before comes back after its blocks were evicted: every eviction so far was
  // paid for again (10 of 10, over the 0.5% for full stickiness). The prefix stays where it is.
  auto evicted_then_asked = MakeTandemPolicy();
  EvictThenAskAgain(*evicted_then_asked);
  EXPECT_EQ(Route(*evicted_then_asked, Request(PrefixWithTail(9003))).prefill, 1);
  // With no idle worker the copy's compute delays someone: in full whatever the caches do.
  QueuePrefill(0, 1, /*tokens=*/16);
  auto busy = MakeTandemPolicy();
  EXPECT_EQ(Route(*busy, Request(PrefixWithTail(9004))).prefill, 1);
}

TEST_F(TandemPolicyTest, AFreeCopyIsStillChargedAsTheMissItIs) {
  // The holder 1.02 s behind: the copy would save the request 0.22 s, less than the floor's 1.6 s,
  // so the prefix stays; with no floor (copies free while the caches lose nothing) it is copied.
  Build(2, 0);
  Cache(1, Chain(1, 400));
  QueuePrefill(1, 1, /*tokens=*/8000);
  auto policy = MakeTandemPolicy();
  EXPECT_EQ(Route(*policy, Request(PrefixWithTail(9001))).prefill, 1);
  TandemOptions no_floor;
  no_floor.branch_stickiness_floor = 0;
  auto free_copies = MakeTandemPolicy(no_floor);
  EXPECT_EQ(Route(*free_copies, Request(PrefixWithTail(9002))).prefill, 0);
  // The floor is a share of cache_stickiness (nothing without it), divided by the prefix's
  // fan-out like the rest of it: a prefix many recent requests ended at is still copied
  // (TheWaitChargeScaledByFanOutCopiesOnlyAPrefixOthersShare).
  TandemOptions no_stickiness;
  no_stickiness.cache_stickiness = 0;
  auto unsticky = MakeTandemPolicy(no_stickiness);
  EXPECT_EQ(Route(*unsticky, Request(PrefixWithTail(9003))).prefill, 0);
}

TEST_F(TandemPolicyTest, AWaitChargeCopiesABranchPointBeforeItsHolderIsSlower) {
  // Worker 1 holds a 400-block prefix (0.8 s of compute) and is 0.5 s behind; worker 0 is idle.
  // For the request alone waiting is faster (about 0.54 s against 0.82 s), so with no charge it
  // waits; with the wait charged once more (weight 1, not scaled by fan-out: the next test) the
  // copy to the idle worker wins.
  Build(2, 0);
  Cache(1, Chain(1, 400));
  QueuePrefill(1, 1, /*tokens=*/4000);
  // Copies free (no floor under rule 4b's scale): the charge alone decides.
  TandemOptions uncharged;
  uncharged.branch_stickiness_floor = 0;
  uncharged.idle_wait_weight = 0;
  auto waiting = MakeTandemPolicy(uncharged);
  EXPECT_EQ(Route(*waiting, Request(PrefixWithTail(9001))).prefill, 1);
  TandemOptions charged;
  charged.branch_stickiness_floor = 0;
  charged.idle_wait_weight = 1.0;
  charged.idle_wait_fan_out = 0;
  auto copying = MakeTandemPolicy(charged);
  EXPECT_EQ(Route(*copying, Request(PrefixWithTail(9002))).prefill, 0);
  // Not while the caches lose what is asked for again (the copy would displace it: rule 4b),
  // however large the weight.
  charged.idle_wait_weight = 100.0;
  auto evicted_then_asked = MakeTandemPolicy(charged);
  EvictThenAskAgain(*evicted_then_asked);
  EXPECT_EQ(Route(*evicted_then_asked, Request(PrefixWithTail(9003))).prefill, 1);
  // Nor with no idle worker: the copy's compute would delay someone.
  QueuePrefill(0, 1, /*tokens=*/16);
  auto busy = MakeTandemPolicy(charged);
  EXPECT_EQ(Route(*busy, Request(PrefixWithTail(9004))).prefill, 1);
}

TEST_F(TandemPolicyTest, TheWaitChargeScaledByFanOutCopiesOnlyAPrefixOthersShare) {
  // The setting of the test above (weight 1 copies the prefix to the idle worker 0), with the
  // charge scaled by (fan-out - 1) / 2: the first request ending its match at the prefix has
  // fan-out 1, so nothing is charged and it waits for its holder; once three requests have ended
  // there (fan-out 3) the charge is in full and the next one is copied.
  Build(2, 0);
  Cache(1, Chain(1, 400));
  QueuePrefill(1, 1, /*tokens=*/4000);
  TandemOptions scaled;
  scaled.branch_stickiness_floor = 0;
  scaled.idle_wait_weight = 1.0;
  scaled.idle_wait_fan_out = 2.0;
  auto policy = MakeTandemPolicy(scaled);
  EXPECT_EQ(Route(*policy, Request(PrefixWithTail(9101))).prefill, 1);
  EXPECT_EQ(Route(*policy, Request(PrefixWithTail(9102))).prefill, 1);
  EXPECT_EQ(Route(*policy, Request(PrefixWithTail(9103))).prefill, 1);
  EXPECT_EQ(Route(*policy, Request(PrefixWithTail(9104))).prefill, 0);
  // The defaults (weight 0.75, F 2, offset 1, floor 0.1) copy it later: the charge is (1 - 0.1) x
  // 0.75 x 0.52 s = 0.35 s from fan-out 3 on, and the floor's stickiness 0.1 x 20 x 0.8 s /
  // fan-out; 0.54 s + 0.35 s - 1.6 s / fan-out exceeds the copy's 0.82 s from fan-out 23 on, the
  // 24th request ending its match there.
  auto by_default = MakeTandemPolicy();
  int first_copy = 0;
  for (int n = 1; n <= 40 && first_copy == 0; ++n) {
    if (Route(*by_default, Request(PrefixWithTail(9200 + n))).prefill == 0) first_copy = n;
  }
  EXPECT_EQ(first_copy, 24);
}

// Rule 4e's setting: worker 1 holds the 400-block prefix and is 1.02 s behind (predicted TTFT
// 1.042 s there), workers 0 and 2 are idle (0.822 s: the whole 6,416 tokens). The floor keeps the
// prefix on its holder (AFreeCopyIsStillChargedAsTheMissItIs) unless the guard stops it.
class TailGuardTest : public TandemPolicyTest {
 protected:
  void SetUp() override {
    Build(3, 0);
    Cache(1, Chain(1, 400));
    QueuePrefill(1, 1, /*tokens=*/8000);
    options_.tail_guard_window = 40;  // acts after 10 decisions
  }
  // `n` decisions on prompts of `blocks` blocks cached nowhere, each predicted at 0.02 s +
  // blocks x 16 / 8,000 on an idle worker: the recent predicted TTFTs the guard reads.
  void RouteUncached(Policy& policy, int n, int blocks) {
    for (int i = 0; i < n; ++i) Route(policy, Request(Chain(100000 + 1000 * i, blocks)));
  }
  // The prefill worker a new policy (options_) picks for a request on the prefix after those
  // `n` decisions.
  WorkerSlot PrefixWorkerAfter(int n, int blocks) {
    auto policy = MakeTandemPolicy(options_);
    RouteUncached(*policy, n, blocks);
    return Route(*policy, Request(PrefixWithTail(9001))).prefill;
  }
  TandemOptions options_;
};

TEST_F(TailGuardTest, ABranchPointDoesNotHoldARequestInTheTail) {
  // The recent decisions predicted 0.9 s (440 blocks): 1.042 s on the holder would be the
  // slowest (by more than 0.02 s, the policy's fixed part per prefill), 0.822 s on an idle worker
  // is not, so the prefix is copied.
  EXPECT_EQ(PrefixWorkerAfter(10, 440), 0);
  // Without the guard the same decisions leave it on its holder.
  options_.tail_guard_quantile = 0;
  EXPECT_EQ(PrefixWorkerAfter(10, 440), 1);
}

TEST_F(TailGuardTest, AHolderWithinAPrefillsFixedPartOfTheTailIsNotPassedOver) {
  // The recent decisions predicted 1.03 s (505 blocks): the holder's 1.042 s is over their 90th
  // percentile by less than the policy's 0.02 s per prefill, a difference its predictions do not
  // resolve, so the prefix stays; at 1.02 s (500 blocks) it is over by 0.022 s and is copied.
  EXPECT_EQ(PrefixWorkerAfter(10, 505), 1);
  EXPECT_EQ(PrefixWorkerAfter(10, 500), 0);
}

TEST_F(TailGuardTest, ItWaitsForEnoughDecisions) {
  EXPECT_EQ(PrefixWorkerAfter(9, 440), 1);  // a quarter of the window is 10
}

TEST_F(TailGuardTest, ARequestWhoseBestIsInTheTailAlreadyIsLeftToTheScore) {
  // The recent decisions predicted 0.42 s (200 blocks): even 0.822 s is over their 90th
  // percentile, so no worker is passed over and the stickiness keeps the prefix.
  EXPECT_EQ(PrefixWorkerAfter(10, 200), 1);
}

TEST_F(TailGuardTest, AHistoryIsNeverPassedOver) {
  // The prompt ending at the prefix's last block was routed: this request continues it (rule 3),
  // and moving a history leaves a dead copy whatever the tail.
  auto guarded = MakeTandemPolicy(options_);
  RouteUncached(*guarded, 10, 440);
  Route(*guarded, Request(Chain(1, 400)));
  EXPECT_EQ(Route(*guarded, Request(PrefixWithTail(9001))).prefill, 1);
}

TEST_F(TailGuardTest, NotWhileEveryWorkerIsBusy) {
  // A copy's compute would then delay the requests queued behind it.
  QueuePrefill(0, 1, /*tokens=*/16);
  QueuePrefill(2, 1, /*tokens=*/16);
  EXPECT_EQ(PrefixWorkerAfter(10, 440), 1);
}

TEST_F(TandemPolicyTest, ATieGoesToTheWorkerThatEvictedLeast) {
  // Three idle workers at the same speed and a prompt none holds: equal scores. Evictions nobody
  // asks for again charge nothing (rule 4c's share stays 0), so only the tie-break tells them
  // apart: not the first slot, but the worker that evicted least lately.
  Build(3, 0);
  auto fresh = MakeTandemPolicy();
  EXPECT_EQ(Route(*fresh, Request(Chain(7000, 10))).prefill, 0);  // nothing evicted: slot order
  Cache(0, Chain(5000, 20));
  Evict(0, Chain(5000, 20));
  Cache(1, Chain(6000, 10));
  Evict(1, Chain(6000, 10));
  auto policy = MakeTandemPolicy();
  EXPECT_EQ(Route(*policy, Request(Chain(7100, 10))).prefill, 2);
  Cache(2, Chain(6100, 15));
  Evict(2, Chain(6100, 15));
  EXPECT_EQ(Route(*policy, Request(Chain(7200, 10))).prefill, 1);  // 10 evicted against 15, 20
}

TEST_F(TandemPolicyTest, ANewPromptAvoidsAFullCacheWhoseEvictionsAreAskedForAgain) {
  // Worker 0 holds a 100-block system prompt; both workers are idle. Alone, a new conversation
  // under that prompt is faster on worker 0 (800 new tokens: 0.12 s, against 0.32 s on worker 1
  // computing all 2,400). Once worker 0 is evicting blocks that are asked for again (here every
  // one), storing 800 more tokens there costs 14 x their compute time x that share (1.4 s): it
  // goes to worker 1, which has room. cache_stickiness 0 keeps rule 4b's weight out of it.
  std::vector<BlockHash> conversation = Chain(1, 100);
  for (BlockHash h = 9000; h < 9050; ++h) conversation.push_back(h);
  auto setup = [&](bool evicting) {
    table_ = WorkerTable();
    index_ = KvIndex(KvIndex::Options{.max_blocks = 1 << 16});
    Build(2, 0);
    Cache(0, Chain(1, 100));
    if (evicting) {
      Cache(0, Chain(6000, 10));
      Evict(0, Chain(6000, 10));
    }
  };
  TandemOptions options;
  options.cache_stickiness = 0;
  for (bool evicting : {false, true}) {
    setup(evicting);
    auto policy = MakeTandemPolicy(options);
    Route(*policy, Request(Chain(6000, 10)));  // routed once; evicted (or not) since
    Route(*policy, Request(Chain(6000, 10)));  // asked for again
    EXPECT_EQ(Route(*policy, Request(conversation)).prefill, evicting ? 1 : 0) << evicting;
  }
  options.displaced_history_stickiness = 0;  // the rule off
  setup(true);
  auto off = MakeTandemPolicy(options);
  Route(*off, Request(Chain(6000, 10)));
  Route(*off, Request(Chain(6000, 10)));
  EXPECT_EQ(Route(*off, Request(conversation)).prefill, 0);
}

TEST_F(TandemPolicyTest, WhileAWorkerIsIdleAFullCacheIsChargedAQuarter) {
  // Worker 0 holds a 100-block system prompt and is evicting blocks that are asked for again
  // (share 1); a new conversation adds 10 blocks (160 tokens: 0.02 s) there, or computes all
  // 1,760 on worker 1 (0.22 s). With no worker idle rule 4c charges 14 x 0.02 s x 1 = 0.28 s on
  // worker 0, which then loses; while some worker is idle a quarter of it (0.07 s), and the
  // conversation joins its system prompt.
  std::vector<BlockHash> conversation = Chain(1, 100);
  for (BlockHash h = 9000; h < 9010; ++h) conversation.push_back(h);
  TandemOptions options;
  options.cache_stickiness = 0;  // rule 4b's weight out of it
  for (bool busy : {false, true}) {
    for (double idle_scale : {1.0, 0.25}) {
      table_ = WorkerTable();
      index_ = KvIndex(KvIndex::Options{.max_blocks = 1 << 16});
      Build(2, 0);
      Cache(0, Chain(1, 100));
      Cache(0, Chain(6000, 10));
      Evict(0, Chain(6000, 10));
      if (busy) {
        QueuePrefill(0, 1, /*tokens=*/16);
        QueuePrefill(1, 1, /*tokens=*/16);
      }
      options.displaced_history_idle_scale = idle_scale;
      auto policy = MakeTandemPolicy(options);
      Route(*policy, Request(Chain(6000, 10)));  // routed once; evicted since
      Route(*policy, Request(Chain(6000, 10)));  // asked for again
      const WorkerSlot expected = !busy && idle_scale < 1 ? 0 : 1;
      EXPECT_EQ(Route(*policy, Request(conversation)).prefill, expected)
          << (busy ? "busy" : "idle") << ", idle scale " << idle_scale;
    }
  }
}

TEST_F(TandemPolicyTest, LearntSpeedsOutweighQueueLengths) {
  Build(2, 0);
  // Worker 0 turns out 100x slower than worker 1.
  table_.OnPrefillDispatched(0, 1000, 1);
  table_.OnPrefillFinished(0, 1000, 1, 1000, 10.0);
  table_.OnPrefillDispatched(1, 1000, 1);
  table_.OnPrefillFinished(1, 1000, 1, 1000, 0.1);
  // Worker 0 has the shorter queue in tokens (the prior speed would pick it), but it is slow.
  QueuePrefill(0, 1, 10000);
  QueuePrefill(1, 1, 20000);
  EXPECT_EQ(Route(*policy_, Request(Chain(1, 4))).prefill, 1);
}

TEST_F(TandemPolicyTest, AWorkerOfShortPrefillsIsNotMistakenForASlowOne) {
  // Both workers take 0.02 s per prefill plus 125 us per token. Worker 0 has computed only short
  // suffixes (100-300 tokens), worker 1 long prompts, and worker 1 has 1 s of work queued. Read as
  // seconds / tokens, worker 0 would look 2-3x slower per token and a 10,000-token prompt would
  // wait behind worker 1's queue (2.27 s) rather than run on idle worker 0 (1.27 s).
  Build(2, 0);
  for (std::int64_t tokens : {100, 300, 150, 250, 100, 200}) {
    table_.OnPrefillDispatched(0, tokens, 1);
    table_.OnPrefillFinished(0, tokens, 1, tokens, 0.02 + 125e-6 * static_cast<double>(tokens));
  }
  for (std::int64_t tokens : {8000, 12000, 9000}) {
    table_.OnPrefillDispatched(1, tokens, 1);
    table_.OnPrefillFinished(1, tokens, 1, tokens, 0.02 + 125e-6 * static_cast<double>(tokens));
  }
  QueuePrefill(1, 1, /*tokens=*/7840);  // 0.02 + 0.98 s
  EXPECT_EQ(Route(*policy_, Request(Chain(1, 625))).prefill, 0);
}

TEST_F(TandemPolicyTest, AnUnmeasuredWorkerIsAssumedAsFastAsTheFastestMeasuredOne) {
  // Worker 0 measured 20 us per token, 8x faster than the prior (125 us), and has 1,000 tokens
  // queued; worker 1 never ran a prefill. At the prior, worker 1 would look 0.145 s away against
  // worker 0's 0.08 s and never be tried; assumed as fast as worker 0 it is 0.04 s away.
  Build(2, 0);
  table_.OnPrefillDispatched(0, 1000, 1);
  table_.OnPrefillFinished(0, 1000, 1, 1000, 0.02);
  QueuePrefill(0, 1, /*tokens=*/1000);
  EXPECT_EQ(Route(*policy_, Request(Chain(1, 63))).prefill, 1);
  // A measured worker slower than the prior does not make the unmeasured one look slow.
  table_ = WorkerTable();
  Build(2, 0);
  table_.OnPrefillDispatched(0, 1000, 1);
  table_.OnPrefillFinished(0, 1000, 1, 1000, 1.0);  // 1 ms per token
  table_.OnPrefillDispatched(1, 100, 1);            // 0.0125 s queued at the prior
  const RouteDecision d = Route(*policy_, Request(Chain(1, 63)));
  EXPECT_EQ(d.prefill, 1);
}

TEST_F(TandemPolicyTest, CountsWorkAlreadyDoneOnTheRunningPrefill) {
  Build(2, 0);
  // Both hold 48,000 queued tokens (6 s at the prior speed); worker 1's started 5.9 s ago.
  table_.OnPrefillDispatched(0, 48000, 1, /*now_seconds=*/10.0);
  table_.OnPrefillDispatched(1, 48000, 1, /*now_seconds=*/4.1);
  Cache(0, Chain(1, 4));  // a small hit on worker 0 is not worth 5.9 s
  const RouteRequest r = Request(Chain(1, 200));
  ClusterView view = View();
  view.now_seconds = 10.0;
  absl::StatusOr<RouteDecision> d = policy_->Route(r, view);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->prefill, 1);
}

TEST_F(TandemPolicyTest, SessionsStayWhileItIsCheap) {
  Build(2, 0);
  RouteRequest r = Request(Chain(1, 4));
  r.session_id = 42;
  ASSERT_EQ(Route(*policy_, r).prefill, 0);
  QueuePrefill(0, 1, 1000);  // 0.15 s more on worker 0
  RouteRequest anonymous = r;
  anonymous.session_id = 0;
  EXPECT_EQ(Route(*policy_, anonymous).prefill, 1);
  EXPECT_EQ(Route(*policy_, r).prefill, 0);
  QueuePrefill(0, 10, 1000);  // now seconds behind: the session moves
  EXPECT_EQ(Route(*policy_, r).prefill, 1);
  // Worker 1 becomes slightly busier than worker 0: the session stays, a newcomer does not.
  QueuePrefill(1, 11, 1000);
  QueuePrefill(1, 1, 800);
  EXPECT_EQ(Route(*policy_, anonymous).prefill, 0);
  EXPECT_EQ(Route(*policy_, r).prefill, 1);
}

TEST_F(TandemPolicyTest, BoundsTheInFlightSpreadWhenAsked) {
  TandemOptions options;
  options.max_in_flight_spread = 16;
  policy_ = MakeTandemPolicy(options);
  Build(2, 0);
  Cache(1, Chain(1, 400));
  // Worker 1 holds the whole prefix and its queued requests are cheap, but 17 more in flight than
  // worker 0 exceeds the bound of 16.
  QueuePrefill(1, 17, /*tokens=*/0);
  EXPECT_EQ(Route(*policy_, Request(Chain(1, 400))).prefill, 0);
  table_.OnPrefillFinished(1, 0, 1, 0, 0);  // 16 more: allowed again
  EXPECT_EQ(Route(*policy_, Request(Chain(1, 400))).prefill, 1);
  // The default has no such bound: a count of requests is not work.
  TandemOptions defaults;
  defaults.full_stickiness_reused_share = 0;  // worker 0 is idle: the prefix would be copied there
  auto unbounded = MakeTandemPolicy(defaults);
  QueuePrefill(1, 100, /*tokens=*/0);
  EXPECT_EQ(Route(*unbounded, Request(Chain(1, 400))).prefill, 1);
}

TEST_F(TandemPolicyTest, ARequestFollowsAPrefixStillBeingComputed) {
  // A 400-block prompt went to worker 1 at t = 0 (6,400 tokens: 0.82 s at the prior speed); the
  // index learns its blocks only when it finishes. A request sharing that prompt at t = 0.1 finds
  // it nowhere in the index; counting the blocks on their way to worker 1, it queues there for
  // the rest of that prefill instead of computing all of it on idle worker 0.
  Build(2, 0);
  auto route_at = [&](Policy& policy, const RouteRequest& r, double now) {
    ClusterView view = View();
    view.now_seconds = now;
    absl::StatusOr<RouteDecision> d = policy.Route(r, view);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *d : RouteDecision{};
  };
  std::vector<BlockHash> longer = Chain(1, 400);
  longer.push_back(9001);
  for (bool track : {true, false}) {
    TandemOptions options;
    options.track_pending = track;
    auto policy = MakeTandemPolicy(options);
    table_ = WorkerTable();
    Build(2, 0);
    QueuePrefill(0, 1, /*tokens=*/0);  // so the first prompt goes to worker 1
    const RouteDecision first = route_at(*policy, Request(Chain(1, 400)), 0.0);
    ASSERT_EQ(first.prefill, 1);
    table_.OnPrefillFinished(0, 0, 1, 0, 0);
    table_.OnPrefillDispatched(1, 6400, 400, /*now_seconds=*/0.0);
    const RouteDecision second = route_at(*policy, Request(longer), 0.1);
    EXPECT_EQ(second.prefill, track ? 1 : 0) << track;
    EXPECT_EQ(second.predicted_cached_tokens, track ? 6400 : 0) << track;
  }
}

TEST_F(TandemPolicyTest, APendingPrefixExpiresAtItsPredictedFirstToken) {
  // Same first prompt; the second comes at t = 5, long after the first was predicted to be stored
  // (0.82 s). The index still does not have it (its event was lost, or it was evicted): the
  // pending entry no longer counts.
  Build(2, 0);
  QueuePrefill(0, 1, /*tokens=*/0);
  ClusterView view = View();
  view.now_seconds = 0;
  ASSERT_EQ(policy_->Route(Request(Chain(1, 400)), view)->prefill, 1);
  table_.OnPrefillFinished(0, 0, 1, 0, 0);
  table_.OnPrefillDispatched(1, 1000, 400, /*now_seconds=*/5.0);  // busy with something else
  std::vector<BlockHash> longer = Chain(1, 400);
  longer.push_back(9001);
  view = View();
  view.now_seconds = 5.0;
  const absl::StatusOr<RouteDecision> d = policy_->Route(Request(longer), view);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->prefill, 0);
  EXPECT_EQ(d->predicted_cached_tokens, 0);
}

TEST_F(TandemPolicyTest, IgnoresAStaleWorkersCache) {
  Build(2, 0);
  Cache(1, Chain(1, 8));
  KvEvent skipped;
  skipped.seq = index_.last_seq(1) + 2;
  ASSERT_EQ(*index_.Apply(1, skipped), EventOutcome::kGap);
  const RouteDecision d = Route(*policy_, Request(Chain(1, 10)));
  EXPECT_EQ(d.prefill, 0);
  EXPECT_EQ(d.predicted_cached_tokens, 0);
}

TEST_F(TandemPolicyTest, PrefersDeviceHitsOverDiskHits) {
  Build(2, 0);
  Cache(0, Chain(1, 8), Tier::kDisk);
  Cache(1, Chain(1, 8), Tier::kDevice);
  EXPECT_EQ(Route(*policy_, Request(Chain(1, 10))).prefill, 1);
}

TEST_F(TandemPolicyTest, DecodeNeedsRoomThenTheFastestStep) {
  Build(1, 2);
  ASSERT_TRUE(table_.Report(1, 0, 0, 100, 100).ok());
  ASSERT_TRUE(table_.Report(2, 0, 0, 100, 100).ok());
  table_.OnDecodeDispatched(1, 95);  // little load but no room for 20 blocks
  for (int i = 0; i < 5; ++i) table_.OnDecodeDispatched(2, 10);
  RouteRequest r = Request(Chain(1, 10));
  r.max_output_tokens = 160;  // 20 blocks in all
  EXPECT_EQ(Route(*policy_, r).decode, 2);
  table_.OnDecodeFinished(1, 95);  // both fit: the lighter one
  EXPECT_EQ(Route(*policy_, r).decode, 1);
}

}  // namespace
}  // namespace tandem::routing
