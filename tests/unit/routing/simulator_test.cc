#include "simulator.h"

#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tandem::sim {
namespace {

constexpr double kEps = 1e-9;

Trace Read(const std::string& text) {
  std::istringstream in(text);
  Trace trace = ReadTrace(in, 4);
  EXPECT_TRUE(trace.skipped.empty());
  return trace;
}

// One prefill and one decode worker with round numbers: 0.1 s per uncached token, 0.01 s per
// transferred block, decode steps of 1 s + 0.5 s per sequence.
SimConfig TinyCluster() {
  SimConfig c;
  c.prefill_workers = 1;
  c.decode_workers = 1;
  c.capacity_blocks = 100;
  c.block_size = 4;
  c.prefill_overhead_seconds = 0;
  c.prefill_seconds_per_token = 0.1;
  c.kv_transfer_seconds_per_block = 0.01;
  c.decode_base_seconds = 1.0;
  c.decode_per_sequence_seconds = 0.5;
  c.decode_per_block_seconds = 0;
  return c;
}

SimResult Replay(const Trace& trace, const SimConfig& config, const std::string& policy_name) {
  auto policy = routing::MakePolicy(policy_name);
  EXPECT_TRUE(policy.ok());
  absl::StatusOr<SimResult> result = Simulate(trace, config, **policy);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : SimResult{};
}

TEST(SimulatorTest, HandComputedTinyTrace) {
  const Trace trace = Read(
      // A: 8 tokens, nothing cached: 0.8 s prefill + 2 blocks x 0.01 -> TTFT 0.82; no decode.
      R"({"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [1, 2]})"
      "\n"
      // B: 8 of 12 tokens cached: 0.4 s + 0.03 -> TTFT 0.43, lands at 10.43; two decode steps
      // alone (1.5 s each) -> ITL 1.5, 1.5.
      R"({"timestamp": 10000, "input_length": 12, "output_length": 3, "hash_ids": [1, 2, 3]})"
      "\n"
      // C: queued behind B: starts 10.4, 0.4 s + 0.01 -> lands 10.81, TTFT 0.81; joins at B's
      // first step end (11.93): ITL 1.12, and its one decode token ends it.
      R"({"timestamp": 10000, "input_length": 4, "output_length": 2, "hash_ids": [9]})"
      "\n");
  const SimResult r = Replay(trace, TinyCluster(), "round-robin");
  EXPECT_EQ(r.policy, "round-robin");
  EXPECT_EQ(r.requests, 3);
  EXPECT_NEAR(r.hit_rate, 8.0 / 24.0, kEps);
  EXPECT_NEAR(r.hit_rate_bound, 8.0 / 24.0, kEps);
  // TTFTs 0.43, 0.81, 0.82: nearest rank p50 = 2nd, p90 = p99 = 3rd.
  EXPECT_NEAR(r.ttft_p50, 0.81, kEps);
  EXPECT_NEAR(r.ttft_p90, 0.82, kEps);
  EXPECT_NEAR(r.ttft_p99, 0.82, kEps);
  // ITLs 1.12, 1.5, 1.5.
  EXPECT_NEAR(r.itl_p50, 1.5, kEps);
  EXPECT_NEAR(r.itl_p99, 1.5, kEps);
  EXPECT_NEAR(r.simulated_seconds, 10.43 + 1.5 + 1.5, kEps);
  EXPECT_EQ(r.index_gaps, 0);
}

TEST(SimulatorTest, EvictionLosesTheHit) {
  const std::string text =
      R"({"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [1, 2]})"
      "\n"
      R"({"timestamp": 5000, "input_length": 4, "output_length": 1, "hash_ids": [5]})"
      "\n"
      R"({"timestamp": 10000, "input_length": 12, "output_length": 1, "hash_ids": [1, 2, 3]})"
      "\n";
  const Trace trace = Read(text);
  SimConfig config = TinyCluster();
  config.capacity_blocks = 3;  // [1, 2] and [5] fit together
  EXPECT_NEAR(Replay(trace, config, "tandem").hit_rate, 8.0 / 24.0, kEps);
  config.capacity_blocks = 2;  // [5] evicts the least recent of [1, 2]: the leaf, then 2 short
  EXPECT_NEAR(Replay(trace, config, "tandem").hit_rate, 4.0 / 24.0, kEps);
  config.capacity_blocks = 1;
  EXPECT_NEAR(Replay(trace, config, "tandem").hit_rate, 0.0, kEps);
}

TEST(SimulatorTest, CacheAwarePoliciesFollowThePrefixAcrossWorkers) {
  // Two conversations of three turns, far enough apart that no queue forms.
  const Trace trace = Read(
      R"({"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [1, 2]})"
      "\n"
      R"({"timestamp": 1000, "input_length": 8, "output_length": 1, "hash_ids": [7, 8]})"
      "\n"
      R"({"timestamp": 2000, "input_length": 12, "output_length": 1, "hash_ids": [7, 8, 9]})"
      "\n"
      R"({"timestamp": 3000, "input_length": 12, "output_length": 1, "hash_ids": [1, 2, 3]})"
      "\n"
      R"({"timestamp": 4000, "input_length": 16, "output_length": 1, "hash_ids": [1, 2, 3, 4]})"
      "\n"
      R"({"timestamp": 5000, "input_length": 16, "output_length": 1, "hash_ids": [7, 8, 9, 10]})"
      "\n");
  SimConfig config = TinyCluster();
  config.prefill_workers = 2;
  config.prefill_seconds_per_token = 0.01;
  const double bound = (8 + 8 + 12 + 12) / 72.0;
  for (const char* name : {"sglang-cache-aware", "dynamo-cost", "tandem"}) {
    const SimResult r = Replay(trace, config, name);
    EXPECT_NEAR(r.hit_rate, bound, kEps) << name;
    EXPECT_NEAR(r.hit_rate_bound, bound, kEps);
  }
  // Round-robin alternates 0 1 0 1 0 1: the second turns miss; the third turns find only the
  // first turn's two blocks (the second turn went elsewhere): 8 + 8 of 72.
  EXPECT_NEAR(Replay(trace, config, "round-robin").hit_rate, 16.0 / 72.0, kEps);
}

// On one prefill worker: A (40 tokens, 4 s) starts at once; B (40 tokens) and C (4 tokens, 0.4 s)
// arrive while it runs.
Trace LongLongShort() {
  return Read(
      R"({"timestamp": 0, "input_length": 40, "output_length": 1, "hash_ids": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]})"
      "\n"
      R"({"timestamp": 100, "input_length": 40, "output_length": 1, "hash_ids": [11, 12, 13, 14, 15, 16, 17, 18, 19, 20]})"
      "\n"
      R"({"timestamp": 200, "input_length": 4, "output_length": 1, "hash_ids": [21]})"
      "\n");
}

TEST(SimulatorTest, TandemsHoldQueueLetsAShortPromptPassALongOne) {
  const Trace trace = LongLongShort();
  SimConfig config = TinyCluster();
  config.pieces.piece_seconds = 0;  // whole prompts: the queue alone (pieces: below)
  // FIFO (what the baselines get, and tandem without the queue): A 4.1, B 8.0 (starts at 4, lands
  // at 8.1), C 8.21 (starts at 8, lands at 8.41).
  config.prefill_hold_depth = 0;
  SimResult r = Replay(trace, config, "tandem");
  EXPECT_NEAR(r.ttft_p50, 8.0, kEps);
  EXPECT_NEAR(r.ttft_p99, 8.21, kEps);
  EXPECT_NEAR(Replay(trace, TinyCluster(), "round-robin").ttft_p50, 8.0, kEps);
  // Held in the router, C goes when A ends: C 4.21 (lands at 4.41), B 8.4 (starts 4.4, lands 8.5).
  config.prefill_hold_depth = 1;
  r = Replay(trace, config, "tandem");
  EXPECT_NEAR(r.ttft_p50, 4.21, kEps);
  EXPECT_NEAR(r.ttft_p99, 8.4, kEps);
  // The floor: each prompt alone on an idle worker with an infinite cache (4.1, 4.1, 0.41).
  EXPECT_NEAR(r.ttft_p90_floor, 4.1, kEps);
}

// Pieces (docs/routing.md rule 11). A (40 tokens, 4 s) starts alone on the one prefill worker, C
// (4 tokens) arrives 0.2 s later. Pieces of 1 s are 2 blocks (8 tokens), and only a rest over two
// pieces is cut: A runs [0, 8) first, then C passes its rest (C's priority 0.4 + 0.1 x 0.2 against
// the rest's 3.2 + 0.1 x 0), then A goes on from its cached pieces: [8, 16), [16, 24), and the
// last 16 tokens whole.
TEST(SimulatorTest, TandemCutsALongPromptSoAShortOnePassesItsRest) {
  const Trace trace = Read(
      R"({"timestamp": 0, "input_length": 40, "output_length": 1, "hash_ids": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]})"
      "\n"
      R"({"timestamp": 200, "input_length": 4, "output_length": 1, "hash_ids": [21]})"
      "\n");
  SimConfig config = TinyCluster();
  std::vector<RequestRecord> records;
  config.per_request = &records;
  const auto ttft_of = [&](std::int64_t prompt_tokens) {
    for (const RequestRecord& r : records) {
      if (r.prompt_tokens == prompt_tokens) return r.ttft;
    }
    ADD_FAILURE() << "no request of " << prompt_tokens << " tokens";
    return -1.0;
  };
  // Whole prompts: C waits for all of A (starts at 4, lands at 4.41).
  config.pieces.piece_seconds = 0;
  SimResult r = Replay(trace, config, "tandem");
  EXPECT_NEAR(ttft_of(40), 4.1, kEps);
  EXPECT_NEAR(ttft_of(4), 4.21, kEps);
  records.clear();
  config.pieces.piece_seconds = 1.0;
  r = Replay(trace, config, "tandem");
  // C starts as A's first piece ends (0.8), lands at 1.21.
  EXPECT_NEAR(ttft_of(4), 1.01, kEps);
  // A: 0.8 + C's 0.4 + three pieces' 0.8 + 0.8 + 1.6, then 10 blocks' transfer.
  EXPECT_NEAR(ttft_of(40), 4.5, kEps);
  EXPECT_EQ(r.prefill_pieces, 3);
  // What A's pieces left in the cache is its own work, not a hit.
  EXPECT_NEAR(r.hit_rate, 0.0, kEps);
  for (const RequestRecord& record : records) {
    EXPECT_EQ(record.computed_tokens, record.prompt_tokens);
  }
  EXPECT_NEAR(records.back().wait, 0.0, kEps);  // A started at once; its pieces are not a wait
  // The baselines never cut, behind the same queue or not.
  records.clear();
  config.hold_every_policy = true;
  Replay(trace, config, "round-robin");
  EXPECT_NEAR(ttft_of(4), 4.21, kEps);
}

TEST(SimulatorTest, PiecesOfAPromptLongerThanTheCacheStillAdvance) {
  // A 10-block prompt on a worker that caches 3 blocks, 2-block pieces (1 s at 0.1 s per token).
  // The cache keeps a chain's leading blocks, so after the second piece it holds blocks 1-3 and
  // never more: by the cache alone every later piece would be [12, 20) again, forever. From the
  // request's own record the pieces end at 8, 16 and 24 tokens, then the rest (16 tokens, not over
  // two pieces) goes whole: 8 + 8 + 12 (24 less the 3 cached blocks) + 28 (40 less them) = 56
  // tokens computed, 5.6 s, then 10 blocks' transfer.
  const Trace trace = Read(
      R"({"timestamp": 0, "input_length": 40, "output_length": 1, "hash_ids": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]})"
      "\n");
  SimConfig config = TinyCluster();
  config.capacity_blocks = 3;
  config.pieces.piece_seconds = 1.0;
  std::vector<RequestRecord> records;
  config.per_request = &records;
  const SimResult r = Replay(trace, config, "tandem");
  EXPECT_EQ(r.prefill_pieces, 3);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].computed_tokens, 56);
  EXPECT_NEAR(records[0].ttft, 5.7, kEps);
}

TEST(SimulatorTest, TheSameHoldQueueInFrontOfABaseline) {
  // Round-robin, as published, sends everything at once (FIFO on the worker); behind the hold
  // queue it gets the same order tandem does.
  const Trace trace = LongLongShort();
  SimConfig config = TinyCluster();
  SimResult r = Replay(trace, config, "round-robin");
  EXPECT_FALSE(r.held);
  EXPECT_NEAR(r.ttft_p50, 8.0, kEps);
  config.hold_every_policy = true;
  r = Replay(trace, config, "round-robin");
  EXPECT_TRUE(r.held);
  EXPECT_NEAR(r.ttft_p50, 4.21, kEps);
  EXPECT_NEAR(r.ttft_p99, 8.4, kEps);
  // A depth of 0 still holds nothing, for any policy.
  config.prefill_hold_depth = 0;
  r = Replay(trace, config, "round-robin");
  EXPECT_FALSE(r.held);
  EXPECT_NEAR(r.ttft_p50, 8.0, kEps);
}

// A 50-block prompt everyone shares (2 s to compute), then bursts of three short questions on it
// every second: the first of each burst runs at once on the holder, the other two wait behind it
// (0.04 s each, far cheaper than recomputing the prompt elsewhere).
Trace HotPrefixBursts() {
  std::string hot;
  for (int b = 1; b <= 50; ++b) absl::StrAppend(&hot, b, ", ");
  std::string text =
      absl::StrCat(R"({"timestamp": 0, "input_length": 200, "output_length": 1, "hash_ids": [)",
                   hot.substr(0, hot.size() - 2), "]}\n");
  for (int burst = 0; burst < 40; ++burst) {
    for (int q = 0; q < 3; ++q) {
      absl::StrAppend(&text, R"({"timestamp": )", 3000 + 1000 * burst,
                      R"(, "input_length": 204, "output_length": 1, "hash_ids": [)", hot,
                      1000 + 10 * burst + q, "]}\n");
    }
  }
  return Read(text);
}

TEST(SimulatorTest, TandemWarmsUpAHotPrefixOnAnIdleWorker) {
  const Trace trace = HotPrefixBursts();
  SimConfig config = TinyCluster();
  config.prefill_workers = 3;
  config.prefill_seconds_per_token = 0.01;
  // Without the rules that copy a branch point to an idle worker as a request's own choice
  // (4b, 4d), only warm-ups copy it.
  routing::TandemOptions options;
  options.full_stickiness_reused_share = 0;
  options.idle_wait_weight = 0;
  const auto replay = [&](const SimConfig& c) {
    std::unique_ptr<routing::Policy> policy = routing::MakeTandemPolicy(options);
    absl::StatusOr<SimResult> result = Simulate(trace, c, *policy);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : SimResult{};
  };
  config.warm_up.enabled = false;
  const SimResult without = replay(config);
  EXPECT_EQ(without.warm_ups, 0);
  EXPECT_EQ(without.warm_up_tokens, 0);
  config.warm_up.enabled = true;
  const SimResult with = replay(config);
  // After four requests waited on the holder, an idle worker computed the 50 blocks alone; once
  // the bursts still waited on two holders, the third worker did too, and no more.
  EXPECT_GE(with.warm_ups, 1);
  EXPECT_LE(with.warm_ups, 2);
  EXPECT_EQ(with.warm_up_tokens, 200 * with.warm_ups);
  // Without: the burst's third question waits for two others, 0.51 s transfer + 3 x 0.04.
  EXPECT_NEAR(without.ttft_p90, 0.63, kEps);
  EXPECT_LT(with.ttft_p90, without.ttft_p90);
  EXPECT_GE(with.hit_rate, without.hit_rate);  // the copy's miss is not a request's
  for (const char* name : {"round-robin", "sglang-cache-aware", "dynamo-cost"}) {
    EXPECT_EQ(Replay(trace, config, name).warm_ups, 0) << name;
  }
}

// Late binding (docs/routing.md rule 10). A conversation's second turn (T) stays with its history
// on worker h behind a 29 s prompt (A, which continues the same first turn), since the other
// worker is busy for longer when T arrives (B, 22 s). When B ends, A still has 7.1 s to run: the
// other worker takes T over and recomputes its 8-token history (0.8 s, weighted 7x: 5.6 s) rather
// than idling.
TEST(SimulatorTest, TandemMovesAHeldPrefillToAWorkerThatFellIdle) {
  const auto line = [](int ms, int tokens, const std::string& ids) {
    return absl::StrCat(R"({"timestamp": )", ms, R"(, "input_length": )", tokens,
                        R"(, "output_length": 1, "hash_ids": [)", ids, "]}\n");
  };
  std::string long_a, long_b;
  for (int b = 0; b < 75; ++b)
    absl::StrAppend(&long_a, b < 2 ? b + 1 : 100 + b, b < 74 ? ", " : "");
  for (int b = 0; b < 55; ++b) absl::StrAppend(&long_b, 300 + b, b < 54 ? ", " : "");
  const Trace trace = Read(absl::StrCat(line(0, 8, "1, 2"), line(1000, 300, long_a),
                                        line(1100, 220, long_b), line(2000, 12, "1, 2, 3")));
  SimConfig config = TinyCluster();
  config.prefill_workers = 2;
  config.pieces.piece_seconds = 0;  // whole prompts: the moves alone
  // The policy's prior and fixed part are the simulated worker's: every prediction is exact.
  config.prefill_overhead_seconds = 0.02;
  routing::TandemOptions options;
  options.prior_prefill_seconds_per_token = config.prefill_seconds_per_token;
  config.held_moves.prior_prefill_seconds_per_token = config.prefill_seconds_per_token;
  std::vector<RequestRecord> records;
  config.per_request = &records;
  const auto replay = [&](bool moves) {
    config.held_moves.enabled = moves;
    records.clear();
    std::unique_ptr<routing::Policy> policy = routing::MakeTandemPolicy(options);
    absl::StatusOr<SimResult> result = Simulate(trace, config, *policy);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : SimResult{};
  };
  const auto of = [&](std::int64_t prompt_tokens) {
    for (const RequestRecord& r : records) {
      if (r.prompt_tokens == prompt_tokens) return r;
    }
    ADD_FAILURE() << "no request of " << prompt_tokens << " tokens";
    return RequestRecord{};
  };
  const SimResult without = replay(false);
  EXPECT_EQ(without.held_moves, 0);
  const int h = of(8).prefill_worker;
  EXPECT_EQ(of(300).prefill_worker, h);
  EXPECT_EQ(of(220).prefill_worker, 1 - h);
  // Stayed: starts as A ends (1 + 0.02 + 292 x 0.1), 4 tokens to compute, 3 blocks to transfer.
  EXPECT_EQ(of(12).prefill_worker, h);
  EXPECT_NEAR(of(12).ttft, 30.22 + 0.42 + 0.03 - 2, 1e-6);
  // At its arrival its history's two blocks are on h alone, and h is where it was routed.
  EXPECT_EQ(of(12).chosen_cached_blocks, 2);
  EXPECT_EQ(of(12).best_cached_blocks, 2);
  EXPECT_EQ(of(220).best_cached_blocks, 0);
  const SimResult with = replay(true);
  EXPECT_EQ(with.held_moves, 1);
  // Moved: starts as B ends (1.1 + 0.02 + 22), all 12 tokens to compute.
  EXPECT_EQ(of(12).prefill_worker, 1 - h);
  EXPECT_NEAR(of(12).ttft, 23.12 + 1.22 + 0.03 - 2, 1e-6);
  // The record keeps what the choice at arrival had: the hit was lost after it, by the move.
  EXPECT_EQ(of(12).chosen_cached_blocks, 2);
  EXPECT_EQ(of(12).computed_tokens, 12);
  EXPECT_LT(with.hit_rate, without.hit_rate);  // the history computed again
  // With a weight that makes the 0.8 s recompute outweigh the 7.1 s left, it stays.
  config.held_moves.extra_compute_weight = 10;
  EXPECT_EQ(replay(true).held_moves, 0);
  EXPECT_EQ(of(12).prefill_worker, h);
  // The baselines keep their choice, held or not.
  config.held_moves.extra_compute_weight = routing::HeldMoveOptions{}.extra_compute_weight;
  config.hold_every_policy = true;
  config.per_request = nullptr;
  EXPECT_EQ(Replay(trace, config, "sglang-cache-aware").held_moves, 0);
}

TEST(SimulatorTest, OracleSharesOneInfiniteCacheBehindACentralQueue) {
  // Two prefill workers. A and B (8 tokens each, 0.8 s) arrive together, then C repeats A's
  // prompt plus one block: the oracle computes only C's last block (0.4 s) on whichever worker
  // finishes it first, even though C's prefix was computed on A's worker.
  const Trace trace = Read(
      R"({"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [1, 2]})"
      "\n"
      R"({"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [3, 4]})"
      "\n"
      R"({"timestamp": 0, "input_length": 12, "output_length": 1, "hash_ids": [1, 2, 5]})"
      "\n");
  SimConfig config = TinyCluster();
  config.prefill_workers = 2;
  // A, B: 0.8 + 0.02 each, in parallel; C waits for the first free worker (0.8) then computes
  // 0.4 s: ends 1.2, lands 1.23. Nearest-rank p90 of {0.82, 0.82, 1.23} is 1.23.
  const SimResult r = Replay(trace, config, "least-load");
  EXPECT_NEAR(r.ttft_p90_oracle, 1.23, kEps);
  // The floor has no queue: C alone takes 0.4 + 0.03.
  EXPECT_NEAR(r.ttft_p90_floor, 0.82, kEps);
  // One worker: A 0.82, B 1.62, C 2.0 + 0.03.
  config.prefill_workers = 1;
  EXPECT_NEAR(Replay(trace, config, "least-load").ttft_p90_oracle, 2.03, kEps);
}

TEST(SimulatorTest, RejectsImpossibleClusters) {
  const Trace trace = Read(
      R"({"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [1]})"
      "\n");
  auto policy = routing::MakeTandemPolicy();
  SimConfig config = TinyCluster();
  config.decode_workers = 0;
  EXPECT_EQ(Simulate(trace, config, *policy).status().code(), absl::StatusCode::kInvalidArgument);
  config = TinyCluster();
  config.prefill_workers = 40;
  config.decode_workers = 40;
  EXPECT_EQ(Simulate(trace, config, *policy).status().code(), absl::StatusCode::kInvalidArgument);
  config = TinyCluster();
  config.prefill_slowdown = {1.0, 2.0};
  EXPECT_EQ(Simulate(trace, config, *policy).status().code(), absl::StatusCode::kInvalidArgument);
  config = TinyCluster();
  config.prefill_hold_depth = -1;
  EXPECT_EQ(Simulate(trace, config, *policy).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SimulatorTest, SlowerWorkerTakesLonger) {
  const Trace trace = Read(
      R"({"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [1, 2]})"
      "\n");
  SimConfig config = TinyCluster();
  config.prefill_slowdown = {3.0};
  EXPECT_NEAR(Replay(trace, config, "least-load").ttft_p50, 2.4 + 0.02, kEps);
}

}  // namespace
}  // namespace tandem::sim
