// The engine over the real llama2.c stories260K model: batching, prefix reuse, chunked prefill
// and preemption must not change a single token, greedy or seeded.

#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "gtest/gtest.h"
#include "reference_decode.h"
#include "tandem/engine/engine.h"
#include "tandem/model/loader.h"

namespace tandem::engine {
namespace {

using testing::Request;
using testing::RunAll;

constexpr int kBos = 1;

class Stories260KEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::filesystem::path dir =
        std::filesystem::path(TANDEM_SHARED_DIR) / "models" / "stories260K";
    if (!std::filesystem::exists(dir / "model.bin")) {
      GTEST_SKIP() << "stories260K not found under " << dir
                   << " (configure TANDEM_SHARED_DIR to the directory holding models/)";
    }
    backend_ = kernels::CreateCpuBackend({.num_threads = 2});
    auto model = model::LoadModel(dir.string(), {}, backend_.get());
    if (model.status().code() == absl::StatusCode::kUnimplemented) {
      GTEST_SKIP() << "llama2.c loader not available: " << model.status();
    }
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
  }

  static EngineConfig Roomy() {
    EngineConfig c;
    c.num_blocks = 256;
    return c;
  }

  std::unique_ptr<Engine> MakeEngine(const EngineConfig& config) {
    auto e = Engine::Create(model_.get(), backend_.get(), config);
    EXPECT_TRUE(e.ok()) << e.status();
    return std::move(*e);
  }

  // BOS then random story-ish tokens; requests 0, 4, 8, 12 share a 35-token prefix.
  std::vector<Request> SixteenRequests(bool sampled) const {
    const int vocab = model_->config().vocab_size;
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> tok(259, vocab - 1);  // skip control and byte tokens
    std::vector<std::int32_t> shared = {kBos};
    for (int i = 0; i < 34; ++i) shared.push_back(tok(rng));
    std::vector<Request> reqs;
    for (int i = 0; i < 16; ++i) {
      Request r;
      r.id = "story-" + std::to_string(i);
      r.prompt = i % 4 == 0 ? shared : std::vector<std::int32_t>{kBos};
      for (int k = 0, n = 2 + (i * 5) % 19; k < n; ++k) r.prompt.push_back(tok(rng));
      r.params.max_tokens = 12 + (i * 13) % 37;
      r.params.stop_token_ids = {kBos};
      if (sampled) {
        r.params.temperature = 0.8f;
        r.params.top_p = 0.9f;
        r.params.seed = 500 + i;
      } else {
        r.params.temperature = 0.0f;
      }
      reqs.push_back(std::move(r));
    }
    return reqs;
  }

  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<model::Model> model_;
};

TEST_F(Stories260KEngineTest, SixteenRequestsBatchedEqualEachAlone) {
  for (bool sampled : {false, true}) {
    SCOPED_TRACE(sampled ? "seeded sampling" : "greedy");
    const std::vector<Request> reqs = SixteenRequests(sampled);
    std::map<std::string, std::vector<std::int32_t>> alone;
    for (const Request& r : reqs) {
      auto engine = MakeEngine(Roomy());
      auto got = RunAll(*engine, {r});
      ASSERT_TRUE(got.ok()) << got.status();
      alone[r.id] = got->at(r.id).tokens;
      auto reference = testing::ReferenceDecode(*model_, r.prompt, r.params, r.id);
      ASSERT_TRUE(reference.ok()) << reference.status();
      EXPECT_EQ(alone[r.id], *reference) << r.id;
    }

    std::size_t generated = 0;
    for (const auto& [id, tokens] : alone) generated += tokens.size();
    EXPECT_GT(generated, 300u) << "requests stopped too early to test much";

    auto engine = MakeEngine(Roomy());
    auto together = RunAll(*engine, reqs);
    ASSERT_TRUE(together.ok()) << together.status();
    for (const Request& r : reqs) EXPECT_EQ(together->at(r.id).tokens, alone[r.id]) << r.id;

    // Tight pool and token budget: chunked prefill and preemption, same tokens.
    EngineConfig tight;
    tight.num_blocks = 12;
    tight.max_batch_tokens = 24;
    auto squeezed = MakeEngine(tight);
    auto got = RunAll(*squeezed, reqs);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_GT(squeezed->stats().num_preemptions, 0);
    for (const Request& r : reqs) EXPECT_EQ(got->at(r.id).tokens, alone[r.id]) << r.id;
  }
}

TEST_F(Stories260KEngineTest, PrefixReuseKeepsOutputsAndReportsHits) {
  const std::vector<Request> reqs = SixteenRequests(false);
  auto engine = MakeEngine(Roomy());
  ASSERT_TRUE(RunAll(*engine, {reqs[0]}).ok());
  auto second = RunAll(*engine, {reqs[4]});  // shares the 35-token prefix: 2 full blocks of 16
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->at(reqs[4].id).cached_tokens, 32);

  EngineConfig no_cache = Roomy();
  no_cache.enable_prefix_caching = false;
  auto plain = MakeEngine(no_cache);
  auto expected = RunAll(*plain, {reqs[4]});
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(expected->at(reqs[4].id).cached_tokens, 0);
  EXPECT_EQ(second->at(reqs[4].id).tokens, expected->at(reqs[4].id).tokens);
}

}  // namespace
}  // namespace tandem::engine
