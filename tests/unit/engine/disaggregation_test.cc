// Prefill on one engine, KV copied block by block, decode on another: the split must not change
// a single token, and every block must find its way back to its pool.
#include <cstring>

#include "engine_test_util.h"
#include "fake_model.h"
#include "gtest/gtest.h"
#include "tandem/engine/engine.h"
#include "tandem/kernels/backend.h"

namespace tandem::engine {
namespace {

using testing::Completion;
using testing::FakeModel;

class DisaggregationTest : public ::testing::Test {
 protected:
  std::unique_ptr<Engine> MakeEngine(FakeModel* model, int num_blocks = 64) {
    EngineConfig cfg;
    cfg.block_size = 4;
    cfg.num_blocks = num_blocks;
    auto e = Engine::Create(model, backend_.get(), cfg);
    EXPECT_TRUE(e.ok()) << e.status();
    return std::move(*e);
  }

  // Runs `prompt` split across two engines the way prefill and decode workers do.
  Completion RunSplit(Engine& prefill, Engine& decode, const std::string& id,
                      const std::vector<std::int32_t>& prompt, SamplingParams params) {
    Completion out;
    SamplingParams first_only = params;
    first_only.max_tokens = 1;
    EXPECT_TRUE(prefill.AddRequest(id, prompt, first_only, {.hold_kv = true}).ok());
    std::int32_t first = -1;
    while (prefill.HasPendingWork()) {
      auto outs = prefill.Step();
      EXPECT_TRUE(outs.ok());
      for (const StepOutput& o : *outs) {
        if (!o.new_tokens.empty()) first = o.new_tokens[0];
      }
    }
    out.tokens.push_back(first);
    auto held = prefill.HeldKvBlocks(id);
    EXPECT_TRUE(held.ok()) << held.status();
    auto reserved = decode.ReserveBlocks(static_cast<int>(prompt.size()));
    EXPECT_TRUE(reserved.ok()) << reserved.status();
    EXPECT_EQ(held->size(), reserved->size());
    const auto& src = prefill.block_manager().storage();
    const auto& dst = decode.block_manager().storage();
    for (std::size_t i = 0; i < held->size(); ++i) {
      std::memcpy(dst.base + (*reserved)[i] * dst.block_floats(),
                  src.base + (*held)[i] * src.block_floats(), src.block_floats() * sizeof(float));
    }
    EXPECT_TRUE(prefill.ReleaseHeldKv(id).ok());
    EXPECT_TRUE(decode.AddPrefilledRequest(id, prompt, first, params, *reserved).ok());
    while (decode.HasPendingWork()) {
      auto outs = decode.Step();
      EXPECT_TRUE(outs.ok());
      for (const StepOutput& o : *outs) {
        out.tokens.insert(out.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
        if (o.finished) out.reason = o.finish_reason;
      }
    }
    return out;
  }

  std::unique_ptr<kernels::Backend> backend_ = kernels::CreateCpuBackend({1});
};

TEST_F(DisaggregationTest, SplitRunMatchesOneEngineGreedyAndSeeded) {
  FakeModel whole_model, prefill_model, decode_model;
  auto whole = MakeEngine(&whole_model);
  auto prefill = MakeEngine(&prefill_model);
  auto decode = MakeEngine(&decode_model);
  const int prefill_free = prefill->stats().num_free_blocks;
  const int decode_free = decode->stats().num_free_blocks;
  const std::vector<std::vector<std::int32_t>> prompts = {
      {5, 9, 13}, {7, 7, 7, 7}, {3, 1, 4, 1, 5, 9, 2, 6, 5}, {11}};
  for (bool seeded : {false, true}) {
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      SamplingParams p;
      p.max_tokens = 12;
      p.ignore_eos = true;
      if (seeded) {
        p.temperature = 0.8f;
        p.top_p = 0.9f;
        p.seed = 1000 + i;
      } else {
        p.temperature = 0;
      }
      const std::string id = "r" + std::to_string(i) + (seeded ? "s" : "g");
      auto alone = testing::RunAll(*whole, {{id, prompts[i], p}});
      ASSERT_TRUE(alone.ok()) << alone.status();
      const Completion split = RunSplit(*prefill, *decode, id, prompts[i], p);
      EXPECT_EQ(split.tokens, alone->at(id).tokens) << id;
      EXPECT_EQ(split.reason, FinishReason::kLength);
    }
  }
  // Prefix caching may keep blocks cached, but none may stay referenced.
  EXPECT_EQ(prefill->stats().num_free_blocks, prefill_free);
  EXPECT_EQ(decode->stats().num_free_blocks, decode_free);
}

TEST_F(DisaggregationTest, FirstTokenThatEndsTheRequestFinishesWithoutReportingItAgain) {
  FakeModel prefill_model, decode_model;
  auto prefill = MakeEngine(&prefill_model);
  auto decode = MakeEngine(&decode_model);
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 1;
  p.ignore_eos = true;
  const Completion split = RunSplit(*prefill, *decode, "one", {4, 5, 6}, p);
  ASSERT_EQ(split.tokens.size(), 1u);  // only the prefill's token
  EXPECT_EQ(split.reason, FinishReason::kLength);
  EXPECT_EQ(decode->stats().num_free_blocks, decode->stats().num_blocks);
}

TEST_F(DisaggregationTest, ReservationsAreAllOrNothingAndReturnable) {
  FakeModel model;
  auto engine = MakeEngine(&model, /*num_blocks=*/8);
  // More than the whole pool can never succeed: not a capacity refusal a caller should retry.
  EXPECT_EQ(engine->ReserveBlocks(33).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine->stats().num_free_blocks, 8);
  EXPECT_EQ(engine->ReserveBlocks(0).status().code(), absl::StatusCode::kInvalidArgument);
  auto blocks = engine->ReserveBlocks(9);  // 3 blocks of 4
  ASSERT_TRUE(blocks.ok());
  EXPECT_EQ(blocks->size(), 3u);
  EXPECT_EQ(engine->stats().num_free_blocks, 5);
  // Not now, but once blocks come back.
  EXPECT_EQ(engine->ReserveBlocks(24).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(engine->stats().num_free_blocks, 5);
  engine->ReleaseBlocks(*blocks);
  EXPECT_EQ(engine->stats().num_free_blocks, 8);
  auto all = engine->ReserveBlocks(24);
  ASSERT_TRUE(all.ok());
  engine->ReleaseBlocks(*all);
}

TEST_F(DisaggregationTest, BadPrefilledRequestsLeaveNoState) {
  FakeModel model;
  auto engine = MakeEngine(&model);
  auto blocks = engine->ReserveBlocks(5);
  ASSERT_TRUE(blocks.ok());
  const int free_before = engine->stats().num_free_blocks;
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 4;
  // Two blocks cannot hold exactly a 9-token prompt.
  EXPECT_EQ(engine->AddPrefilledRequest("x", std::vector<std::int32_t>(9, 3), 1, p, *blocks).code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<std::int32_t> five = {1, 2, 3, 4, 5};
  EXPECT_EQ(engine->AddPrefilledRequest("x", five, -1, p, *blocks).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(engine->HasPendingWork());
  EXPECT_EQ(engine->stats().num_free_blocks, free_before);
  // The caller still owns the reservation and can hand it back.
  engine->ReleaseBlocks(*blocks);
  EXPECT_EQ(engine->stats().num_free_blocks, engine->stats().num_blocks);
}

TEST_F(DisaggregationTest, HeldKvIsKeptOnlyForCompletedRequests) {
  FakeModel model;
  auto engine = MakeEngine(&model);
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 50;
  p.ignore_eos = true;
  const std::vector<std::int32_t> prompt = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(engine->AddRequest("c", prompt, p, {.hold_kv = true}).ok());
  ASSERT_TRUE(engine->Step().ok());
  ASSERT_TRUE(engine->Cancel("c").ok());
  ASSERT_TRUE(engine->Step().ok());
  EXPECT_EQ(engine->HeldKvBlocks("c").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(engine->stats().num_free_blocks, engine->stats().num_blocks);
  EXPECT_EQ(engine->ReleaseHeldKv("c").code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tandem::engine
