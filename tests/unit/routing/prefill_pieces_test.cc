#include "tandem/routing/prefill_pieces.h"

#include "gtest/gtest.h"

namespace tandem::routing {
namespace {

// 1 ms per token and 0.1 s pieces: 100 tokens, 6 blocks of 16 (96 tokens) per piece.
constexpr double kSecondsPerToken = 0.001;
constexpr int kBlock = 16;

TEST(PrefillPiecesTest, OnlyARestLongerThanTwoPiecesIsCutAtABlockBoundary) {
  const PrefillPieceOptions options{.piece_seconds = 0.1, .min_pieces = 2};
  EXPECT_EQ(NextPiece(options, 1000, 0, 0, kBlock, kSecondsPerToken, false, -1),
            (PrefillPiece{.start_tokens = 0, .end_tokens = 96}));
  // From what the worker holds of the prompt, rounded down to a whole block: the piece starts
  // there.
  EXPECT_EQ(NextPiece(options, 1000, 96, 0, kBlock, kSecondsPerToken, false, -1),
            (PrefillPiece{.start_tokens = 96, .end_tokens = 192}));
  EXPECT_EQ(NextPiece(options, 1000, 100, 0, kBlock, kSecondsPerToken, false, -1),
            (PrefillPiece{.start_tokens = 96, .end_tokens = 192}));
  // A rest of two pieces or less goes whole (1000 - 816 = 184 <= 192).
  EXPECT_EQ(NextPiece(options, 1000, 816, 0, kBlock, kSecondsPerToken, false, -1), std::nullopt);
  EXPECT_EQ(NextPiece(options, 192, 0, 0, kBlock, kSecondsPerToken, false, -1), std::nullopt);
  EXPECT_EQ(NextPiece(options, 193, 0, 0, kBlock, kSecondsPerToken, false, -1),
            (PrefillPiece{.start_tokens = 0, .end_tokens = 96}));
  // A faster worker gets longer pieces: the same seconds.
  EXPECT_EQ(NextPiece(options, 10000, 0, 0, kBlock, kSecondsPerToken / 10, false, -1),
            (PrefillPiece{.start_tokens = 0, .end_tokens = 992}));
  // At least one block, however slow the worker.
  EXPECT_EQ(NextPiece(options, 1000, 0, 0, kBlock, 1.0, false, -1),
            (PrefillPiece{.start_tokens = 0, .end_tokens = 16}));
}

TEST(PrefillPiecesTest, PiecesAdvanceFromTheLastOneEvenWhereItWasEvicted) {
  const PrefillPieceOptions options{.piece_seconds = 0.1, .min_pieces = 2};
  // The worker holds 32 tokens of the prompt but the last piece there ended at 192: the next
  // piece starts at 192, not again at 32.
  EXPECT_EQ(NextPiece(options, 1000, 32, 192, kBlock, kSecondsPerToken, false, -1),
            (PrefillPiece{.start_tokens = 192, .end_tokens = 288}));
  // What is cached counts where it is further.
  EXPECT_EQ(NextPiece(options, 1000, 288, 192, kBlock, kSecondsPerToken, false, -1),
            (PrefillPiece{.start_tokens = 288, .end_tokens = 384}));
}

TEST(PrefillPiecesTest, NothingIsCutWhileOtherPrefillsWaitForTheWorkerOrWhenOff) {
  const PrefillPieceOptions options{.piece_seconds = 0.1, .min_pieces = 2};
  EXPECT_EQ(NextPiece(options, 1000, 0, 0, kBlock, kSecondsPerToken, /*others_held=*/true, -1),
            std::nullopt);
  EXPECT_EQ(NextPiece({.piece_seconds = 0}, 1000, 0, 0, kBlock, kSecondsPerToken, false, -1),
            std::nullopt);
  EXPECT_EQ(NextPiece(options, 1000, 0, 0, kBlock, /*seconds_per_token=*/0, false, -1),
            std::nullopt);
}

TEST(PrefillPiecesTest, APieceEndsBeforeTheFirstImagePosition) {
  const PrefillPieceOptions options{.piece_seconds = 0.1, .min_pieces = 2};
  EXPECT_EQ(NextPiece(options, 1000, 0, 0, kBlock, kSecondsPerToken, false, 70),
            (PrefillPiece{.start_tokens = 0, .end_tokens = 64}));
  EXPECT_EQ(NextPiece(options, 1000, 0, 0, kBlock, kSecondsPerToken, false, 500),
            (PrefillPiece{.start_tokens = 0, .end_tokens = 96}));
  // Nothing whole before it: no piece.
  EXPECT_EQ(NextPiece(options, 1000, 0, 0, kBlock, kSecondsPerToken, false, 10), std::nullopt);
  EXPECT_EQ(NextPiece(options, 1000, 64, 0, kBlock, kSecondsPerToken, false, 70), std::nullopt);
}

TEST(PrefillPiecesTest, APieceDoneIsASpeedSampleAndTheRestIsHeldAgainInFlight) {
  WorkerTable table;
  ASSERT_TRUE(table.Add(0, Role::kPrefill).ok());
  PrefillQueue queue(PrefillQueue::Options{.depth = 1, .aging = 0.1});
  table.OnPrefillDispatched(0, 1000, 70, /*now=*/0);
  ASSERT_TRUE(queue.Enqueue(1, 0, 1.0, 0, 1000));
  table.OnPrefillDispatched(0, 50, 4, 0.05);
  ASSERT_FALSE(queue.Enqueue(2, 0, 0.05, 0.05, 50));
  // The first 96 tokens took 0.192 s: 2 ms per token.
  const std::vector<PrefillQueue::Ticket> released =
      ApplyPieceDone(1, 0, 96, 96, 0.192, 904, /*now=*/0.2, 0.001, &table, &queue);
  EXPECT_EQ(released, std::vector<PrefillQueue::Ticket>({2}));  // 0.05 + 0.005 before 1.808
  const WorkerState& s = table.states()[0];
  EXPECT_EQ(s.in_flight, 2);
  EXPECT_EQ(s.queued_prefill_tokens, 954);
  EXPECT_EQ(s.active_blocks, 74);
  EXPECT_DOUBLE_EQ(s.prefill_seconds_per_token, 0.002);
  EXPECT_DOUBLE_EQ(s.prefill_head_started_seconds, 0.2);
  EXPECT_TRUE(queue.IsHeld(1));
  EXPECT_EQ(queue.tokens(1), 904);
  EXPECT_EQ(queue.Done(2), std::vector<PrefillQueue::Ticket>({1}));
}

TEST(PrefillPiecesTest, OnlyTheTandemPolicyCutsBehindAHoldQueueWithAPieceSize) {
  const PrefillPieceOptions pieces;
  EXPECT_TRUE(CutsPrefills(pieces, "tandem", 1));
  for (const char* baseline : {"round-robin", "least-load", "sglang-cache-aware", "dynamo-cost"}) {
    EXPECT_FALSE(CutsPrefills(pieces, baseline, 1)) << baseline;
  }
  EXPECT_FALSE(CutsPrefills(pieces, "tandem", 0)) << "no hold queue to keep the rest in";
  EXPECT_FALSE(CutsPrefills({.piece_seconds = 0}, "tandem", 1)) << "whole prompts";
}

}  // namespace
}  // namespace tandem::routing
