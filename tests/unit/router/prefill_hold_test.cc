// The router's prefill hold queue (tandem policy): beyond --prefill-hold-depth prefills out per
// prefill worker, requests wait in the router and the shortest predicted goes next; a held request
// gives up on cancellation or its deadline; a worker leaving routing releases what it held.
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "async/event.h"
#include "gtest/gtest.h"
#include "workers/prefix_router.h"
#include "unconnected_worker.h"

namespace tandem::router {
namespace {

using std::chrono::milliseconds;
using SystemClock = std::chrono::system_clock;
using testing::UnconnectedWorker;

pid_t CurrentThreadId() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

// Waits (bounded) until thread `tid` of this process is blocked ('S' in /proc): a waiter is then
// inside its wait, so what the caller does next wakes it rather than racing its start.
bool WaitUntilAsleep(pid_t tid) {
  const std::string path = "/proc/self/task/" + std::to_string(tid) + "/stat";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(path);
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto paren = stat.rfind(')');  // the state follows the command name
    if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'S') {
      return true;
    }
    std::this_thread::yield();
  }
  return false;
}

// Distinct prompts (no shared prefix) of n tokens.
std::vector<std::int32_t> Prompt(int n, int seed) { return std::vector<std::int32_t>(n, seed); }

class PrefillHoldTest : public ::testing::Test {
 protected:
  void Start(const std::string& policy, int depth = 1, bool held_moves = true,
             double piece_seconds = 0) {
    auto router = PrefixRouter::Create({.block_size = 16,
                                        .policy = policy,
                                        .prefill_hold_depth = depth,
                                        .prefill_hold_aging = 0.1,
                                        .held_moves = held_moves,
                                        .prefill_pieces = {.piece_seconds = piece_seconds}});
    ASSERT_TRUE(router.ok()) << router.status();
    router_ = std::move(*router);
    for (const auto& e : {p1_, p2_, d_}) ASSERT_TRUE(router_->OnRegistered(e->info()).ok());
  }

  PrefixRouter::Choice Choose(const std::vector<std::int32_t>& prompt,
                              const PrefixRouter::Candidates& candidates) {
    absl::StatusOr<PrefixRouter::Choice> choice = router_->Choose(prompt, candidates);
    EXPECT_TRUE(choice.ok()) << choice.status();
    return choice.ok() ? *choice : PrefixRouter::Choice{};
  }

  absl::StatusOr<std::optional<WorkerLease::Moved>> AwaitTurn(
      const PrefixRouter::Choice& c, CallCanceller* canceller,
      milliseconds within = milliseconds(0)) {
    return async::BlockOn(&executor_, router_->PrefillTurn(c.prefill_ticket, &executor_, canceller,
                                                           SystemClock::now() + within));
  }
  absl::Status Await(const PrefixRouter::Choice& c, CallCanceller* canceller,
                     milliseconds within = milliseconds(0)) {
    return AwaitTurn(c, canceller, within).status();
  }

  std::shared_ptr<WorkerEntry> p1_ = UnconnectedWorker("p1", v1::WORKER_ROLE_PREFILL);
  std::shared_ptr<WorkerEntry> p2_ = UnconnectedWorker("p2", v1::WORKER_ROLE_PREFILL);
  std::shared_ptr<WorkerEntry> d_ = UnconnectedWorker("d", v1::WORKER_ROLE_DECODE);
  PrefixRouter::Candidates one_prefill_{.prefill = {{p1_}}, .decode = {{d_}}};
  PrefixRouter::Candidates other_prefill_{.prefill = {{p2_}}, .decode = {{d_}}};
  PrefixRouter::Candidates both_prefill_{.prefill = {{p1_}, {p2_}}, .decode = {{d_}}};
  async::Executor executor_{2};
  std::unique_ptr<PrefixRouter> router_;
  CallCanceller canceller_;
};

TEST_F(PrefillHoldTest, HoldsBeyondTheDepthAndReleasesTheShortestFirst) {
  Start("tandem");
  const PrefixRouter::Choice running = Choose(Prompt(1000, 1), one_prefill_);
  const PrefixRouter::Choice long_one = Choose(Prompt(800, 2), one_prefill_);
  const PrefixRouter::Choice short_one = Choose(Prompt(32, 3), one_prefill_);
  EXPECT_FALSE(running.held);
  EXPECT_TRUE(long_one.held);
  EXPECT_TRUE(short_one.held);
  EXPECT_TRUE(Await(running, &canceller_).ok());
  EXPECT_TRUE(router_->PrefillHeld(long_one.prefill_ticket));
  EXPECT_TRUE(router_->PrefillHeld(short_one.prefill_ticket));

  v1::PrefillResponse answer;
  router_->PrefillFinished(running.prefill_ticket, &answer);
  EXPECT_FALSE(router_->PrefillHeld(short_one.prefill_ticket));  // arrived later, shorter
  EXPECT_TRUE(router_->PrefillHeld(long_one.prefill_ticket));
  EXPECT_TRUE(Await(short_one, &canceller_).ok());

  // A waiter wakes when its turn comes: the turn comes only once it is asleep in the wait.
  std::atomic<bool> finished{false};
  const pid_t waiter = CurrentThreadId();
  std::thread finisher([&] {
    EXPECT_TRUE(WaitUntilAsleep(waiter));
    finished = true;
    router_->PrefillFinished(short_one.prefill_ticket, &answer);
  });
  EXPECT_TRUE(Await(long_one, &canceller_, milliseconds(10000)).ok());
  EXPECT_TRUE(finished.load()) << "returned before its turn came";
  finisher.join();
}

TEST_F(PrefillHoldTest, AHeldPrefillGivesUpOnCancellationOrDeadlineAndFreesNoPlace) {
  Start("tandem");
  const PrefixRouter::Choice running = Choose(Prompt(1000, 1), one_prefill_);
  const PrefixRouter::Choice cancelled = Choose(Prompt(32, 2), one_prefill_);
  const PrefixRouter::Choice timed_out = Choose(Prompt(48, 3), one_prefill_);
  const PrefixRouter::Choice last = Choose(Prompt(64, 4), one_prefill_);
  ASSERT_TRUE(cancelled.held && timed_out.held && last.held);

  CallCanceller gone;
  const pid_t waiter = CurrentThreadId();
  std::thread client([&] {
    EXPECT_TRUE(WaitUntilAsleep(waiter));  // the client leaves while the request waits
    gone.Cancel(absl::CancelledError("client disconnected"));
  });
  const absl::Status why = Await(cancelled, &gone, milliseconds(10000));
  client.join();
  EXPECT_EQ(why.code(), absl::StatusCode::kCancelled) << why;
  EXPECT_EQ(Await(timed_out, &canceller_, milliseconds(30)).code(),
            absl::StatusCode::kDeadlineExceeded);
  // Neither took the running prefill's place; their leases end without an answer.
  EXPECT_TRUE(router_->PrefillHeld(last.prefill_ticket));
  router_->PrefillFinished(cancelled.prefill_ticket, nullptr);
  router_->PrefillFinished(timed_out.prefill_ticket, nullptr);
  EXPECT_TRUE(router_->PrefillHeld(last.prefill_ticket));
  v1::PrefillResponse answer;
  router_->PrefillFinished(running.prefill_ticket, &answer);
  EXPECT_FALSE(router_->PrefillHeld(last.prefill_ticket));
}

TEST_F(PrefillHoldTest, AWorkerLeavingRoutingReleasesWhatItHeld) {
  Start("tandem");
  const PrefixRouter::Choice running = Choose(Prompt(1000, 1), one_prefill_);
  const PrefixRouter::Choice held = Choose(Prompt(32, 2), one_prefill_);
  ASSERT_TRUE(held.held);
  // p1 is no longer a candidate (its lease ran out): what waits for it goes, to fail or finish on
  // its own rather than wait for a completion that will not come.
  const PrefixRouter::Candidates without_p1{.prefill = {{p2_}}, .decode = {{d_}}};
  const PrefixRouter::Choice elsewhere = Choose(Prompt(32, 3), without_p1);
  EXPECT_EQ(elsewhere.prefill, p2_);
  EXPECT_FALSE(router_->PrefillHeld(held.prefill_ticket));
  EXPECT_TRUE(Await(held, &canceller_).ok());
}

TEST_F(PrefillHoldTest, BaselinesAndDepthZeroNeverHold) {
  for (const char* policy : {"round-robin", "least-load", "sglang-cache-aware", "dynamo-cost"}) {
    Start(policy);
    for (int i = 0; i < 4; ++i) EXPECT_FALSE(Choose(Prompt(500, i), one_prefill_).held) << policy;
  }
  Start("tandem", /*depth=*/0);
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(Choose(Prompt(500, i), one_prefill_).held);
}

TEST_F(PrefillHoldTest, CombinedWorkersAreNeverHeld) {
  // A combined worker's "prefill" lasts its whole generation: holding would serialise them.
  Start("tandem");
  auto c = UnconnectedWorker("c", v1::WORKER_ROLE_COMBINED);
  ASSERT_TRUE(router_->OnRegistered(c->info()).ok());
  const PrefixRouter::Candidates combined{.prefill = {{c}}};
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(Choose(Prompt(500, i), combined).held);
}

// Late binding (docs/routing.md rule 10): a short prefill is held on p1, whose long prompt was
// predicted to end before p2's longer one; p2 ends first and falls idle. Nothing of the short one
// is cached anywhere, so the move costs nothing and it goes to p2.
TEST_F(PrefillHoldTest, AHeldPrefillMovesToAPrefillWorkerThatFellIdle) {
  for (bool held_moves : {true, false}) {
    SCOPED_TRACE(held_moves ? "moves on" : "moves off");
    Start("tandem", 1, held_moves);
    const PrefixRouter::Choice running = Choose(Prompt(4000, 1), one_prefill_);
    const PrefixRouter::Choice other = Choose(Prompt(6000, 2), other_prefill_);
    const PrefixRouter::Choice waiting = Choose(Prompt(48, 3), both_prefill_);
    ASSERT_FALSE(running.held);
    ASSERT_FALSE(other.held);
    ASSERT_TRUE(waiting.held);
    EXPECT_EQ(waiting.prefill, p1_);

    v1::PrefillResponse answer;
    router_->PrefillFinished(other.prefill_ticket, &answer);  // p2 is idle now
    EXPECT_EQ(router_->PrefillHeld(waiting.prefill_ticket), !held_moves);
    if (!held_moves) continue;
    absl::StatusOr<std::optional<WorkerLease::Moved>> turn = AwaitTurn(waiting, &canceller_);
    ASSERT_TRUE(turn.ok()) << turn.status();
    ASSERT_TRUE(turn->has_value());
    EXPECT_EQ((*turn)->to, p2_);
    EXPECT_EQ((*turn)->predicted_cached_tokens, 0);
    // p1's place is still taken by the long one; the moved one holds p2's.
    const PrefixRouter::Choice next = Choose(Prompt(32, 4), other_prefill_);
    EXPECT_TRUE(next.held);
    router_->PrefillFinished(waiting.prefill_ticket, &answer);
    EXPECT_FALSE(router_->PrefillHeld(next.prefill_ticket));
  }
}

// A worker that is not idle takes nothing over: p2 still has a prefill out.
TEST_F(PrefillHoldTest, OnlyAnIdleWorkerTakesAHeldPrefillOver) {
  Start("tandem");
  const PrefixRouter::Choice running = Choose(Prompt(4000, 1), one_prefill_);
  const PrefixRouter::Choice first = Choose(Prompt(6000, 2), other_prefill_);
  const PrefixRouter::Choice second = Choose(Prompt(80, 5), other_prefill_);
  const PrefixRouter::Choice waiting = Choose(Prompt(48, 3), both_prefill_);
  ASSERT_TRUE(second.held);
  ASSERT_TRUE(waiting.held);
  ASSERT_EQ(waiting.prefill, p1_);
  v1::PrefillResponse answer;
  router_->PrefillFinished(first.prefill_ticket, &answer);  // p2 starts `second`: busy
  EXPECT_FALSE(router_->PrefillHeld(second.prefill_ticket));
  EXPECT_TRUE(router_->PrefillHeld(waiting.prefill_ticket));
  // Still p1's: its own worker's end releases it, unmoved.
  router_->PrefillFinished(running.prefill_ticket, &answer);
  EXPECT_FALSE(router_->PrefillHeld(waiting.prefill_ticket));
  absl::StatusOr<std::optional<WorkerLease::Moved>> turn = AwaitTurn(waiting, &canceller_);
  ASSERT_TRUE(turn.ok()) << turn.status();
  EXPECT_FALSE(turn->has_value());
}

// Pieces (rule 11) only under the tandem policy behind its hold queue, between prefill-only
// workers; a piece whose call fails leaves the prefill out on its worker, to go whole.
TEST_F(PrefillHoldTest, APieceThatFailsLeavesThePrefillOutToGoWhole) {
  for (const char* policy : {"round-robin", "dynamo-cost"}) {
    Start(policy, 1, true, /*piece_seconds=*/0.1);
    EXPECT_FALSE(Choose(Prompt(4000, 1), one_prefill_).may_cut) << policy;
  }
  Start("tandem", /*depth=*/0, true, 0.1);
  EXPECT_FALSE(Choose(Prompt(4000, 1), one_prefill_).may_cut);
  Start("tandem", 1, true, /*piece_seconds=*/0);
  EXPECT_FALSE(Choose(Prompt(4000, 1), one_prefill_).may_cut);
  auto c = UnconnectedWorker("c", v1::WORKER_ROLE_COMBINED);
  Start("tandem", 1, true, 0.1);
  ASSERT_TRUE(router_->OnRegistered(c->info()).ok());
  EXPECT_FALSE(Choose(Prompt(4000, 1), PrefixRouter::Candidates{.prefill = {{c}}}).may_cut);

  const std::vector<std::int32_t> prompt = Prompt(4000, 2);
  const PrefixRouter::Choice long_one = Choose(prompt, one_prefill_);
  ASSERT_TRUE(long_one.may_cut);
  ASSERT_FALSE(long_one.held);
  ASSERT_TRUE(Await(long_one, &canceller_).ok());
  // p1 does not answer (its port is closed): no piece ran.
  absl::StatusOr<std::optional<std::int64_t>> piece = async::BlockOn(
      &executor_, router_->RunPrefillPiece(long_one.prefill_ticket, prompt, 0, p1_, &executor_,
                                           &canceller_, SystemClock::now() + milliseconds(5000)));
  ASSERT_TRUE(piece.ok()) << piece.status();
  EXPECT_FALSE(piece->has_value());
  // Still out on p1: the next prefill for it waits.
  const PrefixRouter::Choice next = Choose(Prompt(32, 3), one_prefill_);
  EXPECT_TRUE(next.held);
  v1::PrefillResponse answer;
  router_->PrefillFinished(long_one.prefill_ticket, &answer);
  EXPECT_FALSE(router_->PrefillHeld(next.prefill_ticket));
}

// The lease of a moved prefill follows it: the dispatcher calls the new worker, whose load counts
// it, and the old one's load drops.
TEST(WorkerLeaseTest, AMovedPrefillsLeaseFollowsItToItsNewWorker) {
  WorkerRegistry registry(WorkerRegistry::Options{});
  std::shared_ptr<WorkerEntry> from = UnconnectedWorker("p1", v1::WORKER_ROLE_PREFILL);
  std::shared_ptr<WorkerEntry> to = UnconnectedWorker("p2", v1::WORKER_ROLE_PREFILL);
  async::Executor executor{1};
  CallCanceller canceller;
  {
    std::unique_ptr<WorkerLease> lease = registry.Acquire(from);
    lease->Watch(&canceller);
    lease->SetStartGate(
        [to](async::Executor*, CallCanceller*,
             SystemClock::time_point) -> async::Task<absl::StatusOr<WorkerLease::Started>> {
          co_return WorkerLease::Started{
              .moved = WorkerLease::Moved{.to = to, .predicted_cached_tokens = 32}};
        });
    EXPECT_EQ(from->router_in_flight(), 1);
    const absl::Status started =
        async::BlockOn(&executor, lease->Start(&executor, &canceller, SystemClock::now()));
    ASSERT_TRUE(started.ok()) << started;
    EXPECT_EQ(&lease->worker(), to.get());
    EXPECT_EQ(lease->moved_cached_tokens(), std::optional<std::int64_t>(32));
    EXPECT_EQ(from->router_in_flight(), 0);
    EXPECT_EQ(to->router_in_flight(), 1);
  }
  EXPECT_EQ(to->router_in_flight(), 0);
  EXPECT_EQ(from->router_in_flight(), 0);
}

}  // namespace
}  // namespace tandem::router
