#include "tandem/engine/engine.h"

#include <map>
#include <random>
#include <vector>

#include "engine_test_util.h"
#include "fake_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "reference_decode.h"

namespace tandem::engine {
namespace {

using testing::Completion;
using testing::FakeModel;
using testing::Greedy;
using testing::ReferenceDecode;
using testing::Request;
using testing::RunAll;

SamplingParams Seeded(int max_tokens, std::uint64_t seed) {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_p = 0.9f;
  p.max_tokens = max_tokens;
  p.seed = seed;
  p.ignore_eos = true;
  return p;
}

// 16 varied requests; some share long prefixes so prefix reuse and batching interact.
std::vector<Request> SixteenRequests(bool sampled, int vocab = 64) {
  std::mt19937 rng(2024);
  std::uniform_int_distribution<int> tok(3, vocab - 1);
  std::vector<std::int32_t> shared(37);
  for (auto& t : shared) t = tok(rng);
  std::vector<Request> reqs;
  for (int i = 0; i < 16; ++i) {
    Request r;
    r.id = "req-" + std::to_string(i);
    if (i % 3 == 0) r.prompt = shared;
    const int extra = 1 + (i * 7) % 23;
    for (int k = 0; k < extra; ++k) r.prompt.push_back(tok(rng));
    const int max_tokens = 5 + (i * 11) % 29;
    r.params = sampled ? Seeded(max_tokens, 1000 + i) : Greedy(max_tokens);
    reqs.push_back(std::move(r));
  }
  return reqs;
}

class EngineTest : public ::testing::Test {
 protected:
  std::unique_ptr<Engine> MakeEngine(const EngineConfig& config) {
    auto e = Engine::Create(&model_, backend_.get(), config);
    EXPECT_TRUE(e.ok()) << e.status();
    return std::move(*e);
  }
  static EngineConfig SmallConfig() {
    EngineConfig c;
    c.block_size = 4;
    c.num_blocks = 256;
    c.max_batch_tokens = 256;
    return c;
  }
  std::vector<std::int32_t> Reference(const Request& r) {
    FakeModel fresh;  // its own call log; the model is stateless otherwise
    auto out = ReferenceDecode(fresh, r.prompt, r.params, r.id);
    EXPECT_TRUE(out.ok()) << out.status();
    return *out;
  }
  void ExpectMatchesReference(const std::vector<Request>& reqs,
                              const std::map<std::string, Completion>& got) {
    ASSERT_EQ(got.size(), reqs.size());
    for (const Request& r : reqs) {
      EXPECT_EQ(got.at(r.id).tokens, Reference(r)) << r.id;
    }
  }

  FakeModel model_;
  std::unique_ptr<kernels::Backend> backend_ = kernels::CreateCpuBackend({1});
};

TEST_F(EngineTest, SingleRequestMatchesReferenceDecode) {
  for (bool sampled : {false, true}) {
    for (const Request& r : SixteenRequests(sampled)) {
      auto engine = MakeEngine(SmallConfig());
      auto got = RunAll(*engine, {r});
      ASSERT_TRUE(got.ok()) << got.status();
      const Completion& c = got->at(r.id);
      EXPECT_EQ(c.tokens, Reference(r)) << r.id;
      EXPECT_EQ(c.tokens.size(), static_cast<std::size_t>(r.params.max_tokens));
      EXPECT_EQ(c.reason, FinishReason::kLength);
      EXPECT_EQ(c.prompt_tokens, static_cast<int>(r.prompt.size()));
    }
  }
}

TEST_F(EngineTest, SixteenRequestsBatchedEqualEachAlone) {
  for (bool sampled : {false, true}) {
    const std::vector<Request> reqs = SixteenRequests(sampled);
    std::map<std::string, std::vector<std::int32_t>> alone;
    for (const Request& r : reqs) {
      auto engine = MakeEngine(SmallConfig());
      auto got = RunAll(*engine, {r});
      ASSERT_TRUE(got.ok()) << got.status();
      alone[r.id] = got->at(r.id).tokens;
    }
    auto engine = MakeEngine(SmallConfig());
    const std::size_t calls_before = model_.calls().size();
    auto together = RunAll(*engine, reqs);
    ASSERT_TRUE(together.ok()) << together.status();
    int max_chunks = 0;
    for (std::size_t i = calls_before; i < model_.calls().size(); ++i) {
      max_chunks = std::max(max_chunks, model_.calls()[i].num_chunks);
    }
    EXPECT_EQ(max_chunks, 16) << "requests were not actually batched";
    for (const Request& r : reqs) EXPECT_EQ(together->at(r.id).tokens, alone[r.id]) << r.id;
    ExpectMatchesReference(reqs, *together);
    EXPECT_EQ(engine->stats().num_free_blocks, engine->stats().num_blocks);
  }
}

TEST_F(EngineTest, SamplingDependsOnSeedNotOnBatchOrder) {
  std::vector<Request> reqs = SixteenRequests(true);
  auto engine = MakeEngine(SmallConfig());
  auto forward = RunAll(*engine, reqs);
  ASSERT_TRUE(forward.ok());
  std::reverse(reqs.begin(), reqs.end());
  auto reversed = RunAll(*engine, reqs);
  ASSERT_TRUE(reversed.ok());
  for (const Request& r : reqs) EXPECT_EQ(forward->at(r.id).tokens, reversed->at(r.id).tokens);
  // Different seeds do give different samples (the comparison above is not vacuous).
  Request a = reqs[0], b = reqs[0];
  b.id = "other";
  b.params.seed = 77;
  a.params.max_tokens = b.params.max_tokens = 30;
  EXPECT_NE(Reference(a), Reference(b));
}

TEST_F(EngineTest, UnseededSamplingIsDerivedFromRequestId) {
  Request r{"abc", {5, 6, 7, 8, 9}, Seeded(20, 0)};
  r.params.seed.reset();
  auto engine = MakeEngine(SmallConfig());
  auto first = engine->Generate(r.prompt, r.params, r.id);
  ASSERT_TRUE(first.ok());
  auto again = engine->Generate(r.prompt, r.params, r.id);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(first->tokens, again->tokens);
  EXPECT_EQ(first->tokens, Reference(r));
  auto other = engine->Generate(r.prompt, r.params, "xyz");
  ASSERT_TRUE(other.ok());
  EXPECT_NE(first->tokens, other->tokens);
}

TEST_F(EngineTest, PrefixReuseReportsHitsAndKeepsOutputs) {
  EngineConfig cfg = SmallConfig();
  cfg.block_size = 16;
  std::vector<std::int32_t> shared(40);
  for (int i = 0; i < 40; ++i) shared[i] = 3 + (i * 13) % 60;
  Request a{"a", shared, Greedy(12)};
  a.prompt.push_back(10);
  Request b{"b", shared, Greedy(12)};
  b.prompt.insert(b.prompt.end(), {11, 12, 13});
  Request exact32{"c", std::vector<std::int32_t>(shared.begin(), shared.begin() + 32), Greedy(5)};

  auto engine = MakeEngine(cfg);
  auto ra = RunAll(*engine, {a});
  ASSERT_TRUE(ra.ok());
  EXPECT_EQ(ra->at("a").cached_tokens, 0);
  auto rb = RunAll(*engine, {b});
  ASSERT_TRUE(rb.ok());
  EXPECT_EQ(rb->at("b").cached_tokens, 32);  // two full shared blocks of 16
  auto rc = RunAll(*engine, {exact32});
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(rc->at("c").cached_tokens, 16);  // the block with the last prompt token is computed

  // A follow-up turn hits the blocks that held the first turn's generated tokens too.
  Request turn2{"a2", a.prompt, Greedy(4)};
  turn2.prompt.insert(turn2.prompt.end(), ra->at("a").tokens.begin(), ra->at("a").tokens.end());
  turn2.prompt.push_back(20);  // 41 + 12 + 1 = 54 tokens; a computed 41 + 11 = 52
  auto r2 = RunAll(*engine, {turn2});
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->at("a2").cached_tokens, 48);

  cfg.enable_prefix_caching = false;
  auto plain = MakeEngine(cfg);
  for (const Request& r : {a, b, exact32, turn2}) {
    auto p = RunAll(*plain, {r});
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->at(r.id).cached_tokens, 0);
    EXPECT_EQ(p->at(r.id).tokens, Reference(r)) << r.id;
  }
  EXPECT_EQ(rb->at("b").tokens, Reference(b));
  EXPECT_EQ(rc->at("c").tokens, Reference(exact32));
  EXPECT_EQ(r2->at("a2").tokens, Reference(turn2));
}

TEST_F(EngineTest, PrefixCachingEmitsStoredAndEvictedEvents) {
  EngineConfig cfg = SmallConfig();
  cfg.num_blocks = 8;
  auto engine = MakeEngine(cfg);
  std::vector<KvCacheEvent> events;
  engine->block_manager().SetEventListener([&](const KvCacheEvent& e) { events.push_back(e); });
  Request a{"a", {3, 4, 5, 6, 7, 8, 9, 10, 11}, Greedy(4)};  // 12 computed tokens: 3 blocks
  ASSERT_TRUE(RunAll(*engine, {a}).ok());
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1].parent_hash, events[0].block_hash);
  Request big{"big", std::vector<std::int32_t>(20, 5), Greedy(13)};  // needs all 8 blocks
  ASSERT_TRUE(RunAll(*engine, {big}).ok());
  int evicted = 0;
  for (const auto& e : events) evicted += e.kind == KvCacheEvent::Kind::kEvicted;
  EXPECT_EQ(evicted, 3);
}

TEST_F(EngineTest, PreemptionUnderTinyPoolKeepsOutputs) {
  // The small token budget keeps prompts partially prefilled while decodes preempt them.
  for (const auto& [sampled, budget] : {std::pair{false, 256}, {true, 256}, {true, 7}}) {
    EngineConfig cfg = SmallConfig();
    cfg.num_blocks = 20;  // 80 token slots for 8 requests of ~40 tokens each
    cfg.max_batch_tokens = budget;
    auto engine = MakeEngine(cfg);
    std::vector<Request> reqs;
    for (int i = 0; i < 8; ++i) {
      Request r;
      r.id = "p" + std::to_string(i);
      for (int k = 0; k < 10 + i % 3; ++k) r.prompt.push_back(3 + (i * 5 + k * 3) % 60);
      r.params = sampled ? Seeded(30, i) : Greedy(30);
      reqs.push_back(r);
    }
    auto got = RunAll(*engine, reqs);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_GT(engine->stats().num_preemptions, 0);
    ExpectMatchesReference(reqs, *got);
    EXPECT_EQ(engine->stats().num_free_blocks, 20);
  }
}

TEST_F(EngineTest, ChunkedPrefillRespectsTokenBudgetAndKeepsOutputs) {
  EngineConfig cfg = SmallConfig();
  cfg.max_batch_tokens = 5;
  auto engine = MakeEngine(cfg);
  std::vector<Request> reqs = SixteenRequests(true);
  reqs.resize(6);
  const std::size_t calls_before = model_.calls().size();
  auto got = RunAll(*engine, reqs);
  ASSERT_TRUE(got.ok()) << got.status();
  bool mixed = false;
  for (std::size_t i = calls_before; i < model_.calls().size(); ++i) {
    ASSERT_LE(model_.calls()[i].num_tokens, 5);
    mixed |= model_.calls()[i].num_chunks > 1;
  }
  EXPECT_TRUE(mixed);
  ExpectMatchesReference(reqs, *got);
}

TEST_F(EngineTest, MaxNumSeqsLimitsTheBatch) {
  EngineConfig cfg = SmallConfig();
  cfg.max_num_seqs = 3;
  auto engine = MakeEngine(cfg);
  const std::vector<Request> reqs = SixteenRequests(false);
  const std::size_t calls_before = model_.calls().size();
  auto got = RunAll(*engine, reqs);
  ASSERT_TRUE(got.ok());
  for (std::size_t i = calls_before; i < model_.calls().size(); ++i) {
    ASSERT_LE(model_.calls()[i].num_chunks, 3);
  }
  ExpectMatchesReference(reqs, *got);
}

TEST_F(EngineTest, RequestsAreServedFirstComeFirstServed) {
  EngineConfig cfg = SmallConfig();
  cfg.max_num_seqs = 1;
  auto engine = MakeEngine(cfg);
  std::vector<Request> reqs = SixteenRequests(false);
  reqs.resize(6);
  std::reverse(reqs.begin(), reqs.end());  // not alphabetical, not by length
  for (const Request& r : reqs) ASSERT_TRUE(engine->AddRequest(r.id, r.prompt, r.params).ok());
  std::vector<std::string> finished;
  while (engine->HasPendingWork()) {
    auto outs = engine->Step();
    ASSERT_TRUE(outs.ok());
    for (const auto& o : *outs) {
      if (o.finished) finished.push_back(o.request_id);
    }
  }
  std::vector<std::string> submitted;
  for (const Request& r : reqs) submitted.push_back(r.id);
  EXPECT_EQ(finished, submitted);
}

TEST_F(EngineTest, StopTokenEndsRequestAndIsReported) {
  Request r{"s", {7, 8, 9, 10}, Greedy(20)};
  const std::vector<std::int32_t> full = Reference(r);
  // First position whose token did not occur earlier, so the stop triggers exactly there.
  std::size_t k = 3;
  while (std::find(full.begin(), full.begin() + k, full[k]) != full.begin() + k) ++k;
  ASSERT_LT(k, full.size());
  r.params.stop_token_ids = {full[k]};
  auto engine = MakeEngine(SmallConfig());
  auto got = engine->Generate(r.prompt, r.params, r.id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->tokens, std::vector<std::int32_t>(full.begin(), full.begin() + k + 1));
  EXPECT_EQ(got->finish_reason, FinishReason::kStop);
}

TEST_F(EngineTest, EosStopsUnlessIgnored) {
  Request r{"e", {7, 8, 9, 10}, Greedy(20)};
  const std::vector<std::int32_t> full = Reference(r);
  testing::FakeModelOptions opts;
  opts.eos_token_id = full[2];
  ASSERT_EQ(std::find(full.begin(), full.begin() + 2, full[2]), full.begin() + 2);
  FakeModel eos_model(opts);
  auto engine = Engine::Create(&eos_model, backend_.get(), SmallConfig());
  ASSERT_TRUE(engine.ok());
  auto ignored = (*engine)->Generate(r.prompt, r.params, r.id);
  ASSERT_TRUE(ignored.ok());
  EXPECT_EQ(ignored->tokens, full);
  r.params.ignore_eos = false;
  auto stopped = (*engine)->Generate(r.prompt, r.params, r.id);
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->tokens.size(), 3u);
  EXPECT_EQ(stopped->finish_reason, FinishReason::kStop);
}

TEST_F(EngineTest, CancelFreesBlocksAndReportsCancelled) {
  EngineConfig cfg = SmallConfig();
  cfg.max_num_seqs = 2;  // the third request is still waiting when cancelled
  auto engine = MakeEngine(cfg);
  std::vector<Request> reqs = SixteenRequests(false);
  reqs.resize(3);
  for (const Request& r : reqs) ASSERT_TRUE(engine->AddRequest(r.id, r.prompt, r.params).ok());
  std::map<std::string, std::vector<std::int32_t>> tokens;
  for (int i = 0; i < 3; ++i) {
    auto outs = engine->Step();
    ASSERT_TRUE(outs.ok());
    for (const auto& o : *outs) tokens[o.request_id].insert(tokens[o.request_id].end(),
                                                            o.new_tokens.begin(),
                                                            o.new_tokens.end());
  }
  ASSERT_EQ(engine->stats().num_running, 2);
  ASSERT_EQ(engine->stats().num_waiting, 1);
  const int free_before = engine->stats().num_free_blocks;
  ASSERT_TRUE(engine->Cancel(reqs[1].id).ok());  // running
  ASSERT_TRUE(engine->Cancel(reqs[2].id).ok());  // waiting
  EXPECT_GT(engine->stats().num_free_blocks, free_before);
  EXPECT_EQ(engine->Cancel(reqs[1].id).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(engine->Cancel("nope").code(), absl::StatusCode::kNotFound);

  auto outs = engine->Step();
  ASSERT_TRUE(outs.ok());
  int cancelled = 0;
  for (const auto& o : *outs) {
    if (o.finish_reason == FinishReason::kCancelled) {
      ++cancelled;
      EXPECT_TRUE(o.finished);
      EXPECT_TRUE(o.request_id == reqs[1].id || o.request_id == reqs[2].id);
    }
  }
  EXPECT_EQ(cancelled, 2);
  auto rest = RunAll(*engine, {});
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(engine->stats().num_free_blocks, engine->stats().num_blocks);
  EXPECT_FALSE(engine->HasPendingWork());
}

TEST_F(EngineTest, BadRequestsAreRejectedWithoutLeavingState) {
  EngineConfig cfg = SmallConfig();
  cfg.num_blocks = 10;  // 40 token slots
  auto engine = MakeEngine(cfg);
  const EngineStats before = engine->stats();
  auto code = [&](const std::string& id, std::vector<std::int32_t> prompt, SamplingParams p) {
    return engine->AddRequest(id, prompt, p).code();
  };
  using absl::StatusCode;
  EXPECT_EQ(code("a", {}, Greedy(4)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("a", {3, 64}, Greedy(4)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("a", {3, -1}, Greedy(4)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("", {3}, Greedy(4)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("a", {3}, Greedy(0)), StatusCode::kInvalidArgument);
  SamplingParams bad_top_p = Greedy(4);
  bad_top_p.top_p = 0.0f;
  EXPECT_EQ(code("a", {3}, bad_top_p), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("a", std::vector<std::int32_t>(30, 3), Greedy(12)),
            StatusCode::kInvalidArgument);  // 41 KV slots > 40 in the pool
  EXPECT_EQ(code("a", std::vector<std::int32_t>(30, 3), Greedy(11)), StatusCode::kOk);
  EXPECT_EQ(code("a", {3}, Greedy(4)), StatusCode::kAlreadyExists);

  testing::FakeModelOptions short_ctx;
  short_ctx.max_position_embeddings = 16;
  FakeModel small(short_ctx);
  auto e2 = Engine::Create(&small, backend_.get(), SmallConfig());
  ASSERT_TRUE(e2.ok());
  EXPECT_EQ((*e2)->AddRequest("x", std::vector<std::int32_t>(10, 3), Greedy(7)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*e2)->AddRequest("x", std::vector<std::int32_t>(10, 3), Greedy(6)).code(),
            StatusCode::kOk);

  ASSERT_TRUE(engine->Cancel("a").ok());
  auto outs = engine->Step();
  ASSERT_TRUE(outs.ok());
  const EngineStats after = engine->stats();
  EXPECT_EQ(after.num_free_blocks, before.num_free_blocks);
  EXPECT_EQ(after.num_waiting, 0);
  EXPECT_EQ(after.num_running, 0);
  EXPECT_FALSE(engine->HasPendingWork());
}

TEST_F(EngineTest, ForwardFailureEndsBatchWithErrorAndEngineRecovers) {
  auto engine = MakeEngine(SmallConfig());
  std::vector<Request> reqs = SixteenRequests(false);
  reqs.resize(2);
  for (const Request& r : reqs) ASSERT_TRUE(engine->AddRequest(r.id, r.prompt, r.params).ok());
  ASSERT_TRUE(engine->Step().ok());
  model_.FailOnCall(static_cast<int>(model_.calls().size()));
  auto outs = engine->Step();
  ASSERT_TRUE(outs.ok());
  ASSERT_EQ(outs->size(), 2u);
  for (const auto& o : *outs) {
    EXPECT_EQ(o.finish_reason, FinishReason::kError);
    EXPECT_THAT(o.error, ::testing::HasSubstr("injected"));
  }
  EXPECT_FALSE(engine->HasPendingWork());
  EXPECT_EQ(engine->stats().num_free_blocks, engine->stats().num_blocks);
  auto again = RunAll(*engine, reqs);
  ASSERT_TRUE(again.ok());
  ExpectMatchesReference(reqs, *again);
}

TEST_F(EngineTest, GenerateNeedsIdleEngine) {
  auto engine = MakeEngine(SmallConfig());
  const std::vector<std::int32_t> prompt = {3, 4};
  ASSERT_TRUE(engine->AddRequest("busy", prompt, Greedy(3)).ok());
  EXPECT_EQ(engine->Generate(prompt, Greedy(3)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(EngineTest, PoolSizedFromMemoryBudget) {
  EngineConfig cfg;
  cfg.block_size = 8;
  cfg.num_blocks = 0;
  const std::int64_t block_bytes = 4LL * 8 * 2 * FakeModel::kFloatsPerToken;
  cfg.kv_cache_bytes = block_bytes * 13 + 5;
  auto engine = MakeEngine(cfg);
  EXPECT_EQ(engine->stats().num_blocks, 13);
  cfg.kv_cache_bytes = block_bytes - 1;
  EXPECT_EQ(Engine::Create(&model_, backend_.get(), cfg).status().code(),
            absl::StatusCode::kInvalidArgument);
  cfg.kv_cache_bytes = block_bytes;
  cfg.max_batch_tokens = 0;
  EXPECT_EQ(Engine::Create(&model_, backend_.get(), cfg).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::engine

// The prefill autoscaling signals (docs/deployment.md): queued prompt tokens fall by exactly what
// each step computes, and the computed total ends at the prompts' length.
namespace tandem::engine {
namespace {

TEST_F(EngineTest, StatsCountQueuedAndComputedPromptTokens) {
  EngineConfig cfg = SmallConfig();
  cfg.max_batch_tokens = 5;
  cfg.enable_prefix_caching = false;  // every prompt token is computed
  auto engine = MakeEngine(cfg);
  const std::vector<std::int32_t> a = {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  const std::vector<std::int32_t> b = {20, 21, 22, 23, 24, 25, 26};
  ASSERT_TRUE(engine->AddRequest("a", a, Greedy(3)).ok());
  ASSERT_TRUE(engine->AddRequest("b", b, Greedy(3)).ok());
  EXPECT_EQ(engine->stats().queued_prefill_tokens, 19);
  EXPECT_EQ(engine->stats().num_prefill_tokens, 0);
  ASSERT_TRUE(engine->Step().ok());
  EXPECT_EQ(engine->stats().num_prefill_tokens, 5);
  EXPECT_EQ(engine->num_prefill_tokens(), 5);
  EXPECT_EQ(engine->stats().queued_prefill_tokens, 14);
  while (engine->HasPendingWork()) ASSERT_TRUE(engine->Step().ok());
  EXPECT_EQ(engine->stats().num_prefill_tokens, 19);
  EXPECT_EQ(engine->stats().queued_prefill_tokens, 0);
}

}  // namespace
}  // namespace tandem::engine
