// Real checkpoints through the host and disk tiers: a prompt whose prefix comes back from host
// memory or disk must decode exactly as it does with caching disabled (greedy, token for token).
// stories260K (llama2.c, /work/shared) and the tiny DeepSeek-V3 / V4 fixtures (tests/fixtures).

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "gtest/gtest.h"
#include "tandem/engine/engine.h"
#include "tandem/kv/clock.h"
#include "tandem/kv/tiered_kv_store.h"
#include "tandem/model/loader.h"

namespace tandem::engine {
namespace {

using testing::Greedy;
using testing::Request;
using testing::RunAll;

struct Checkpoint {
  const char* name;
  std::filesystem::path dir;
  const char* marker;  // a file that must exist
};

std::vector<Checkpoint> Checkpoints() {
  const std::filesystem::path fixtures = std::filesystem::path(TANDEM_SOURCE_DIR) / "tests" / "fixtures";
  return {
      {"stories260K", std::filesystem::path(TANDEM_SHARED_DIR) / "models" / "stories260K",
       "model.bin"},
      {"deepseek_v3_tiny", fixtures / "deepseek_v3_tiny", "model.safetensors"},
      {"deepseek_v4_tiny", fixtures / "deepseek_v4_tiny", "model.safetensors"},
  };
}

class TieredRealModelTest : public ::testing::TestWithParam<Checkpoint> {
 protected:
  void SetUp() override {
    const Checkpoint& c = GetParam();
    if (!std::filesystem::exists(c.dir / c.marker)) {
      GTEST_SKIP() << c.name << " not found under " << c.dir
                   << " (stories260K needs TANDEM_SHARED_DIR pointing at the shared data)";
    }
    backend_ = kernels::CreateCpuBackend({.num_threads = 2});
    auto model = model::LoadModel(c.dir.string(), {}, backend_.get());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    std::string pattern = ::testing::TempDir() + "tandem_tiered_model_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  std::unique_ptr<Engine> MakeEngine(kv::TieredKvStore* store, bool caching) {
    EngineConfig c;
    c.block_size = 4;
    c.num_blocks = 24;
    c.max_batch_tokens = 64;
    c.enable_prefix_caching = caching;
    c.lower_tiers = store;
    auto e = Engine::Create(model_.get(), backend_.get(), c);
    EXPECT_TRUE(e.ok()) << e.status();
    return std::move(*e);
  }
  std::vector<std::int32_t> Prompt(int seed, int len) const {
    std::mt19937 rng(seed);
    const int vocab = model_->config().vocab_size;
    std::uniform_int_distribution<int> tok(vocab > 300 ? 259 : 3, vocab - 1);
    std::vector<std::int32_t> p(len);
    for (auto& t : p) t = tok(rng);
    return p;
  }

  kv::FakeClock clock_{1'700'000'000'000};
  std::string dir_;
  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<model::Model> model_;
};

TEST_P(TieredRealModelTest, PrefixFromHostAndDiskDecodesExactlyAsWithoutCaching) {
  kv::TieredKvStoreOptions o;
  o.host_capacity_bytes = 4ull << 20;
  o.host_low_watermark = 0.01;  // once the store is stepped, nearly everything goes to disk
  o.disk_path = dir_;
  o.disk_capacity_bytes = 256ull << 20;
  o.clock = &clock_;
  o.background_thread = false;
  auto store = kv::TieredKvStore::Open(o);
  ASSERT_TRUE(store.ok()) << store.status();
  auto engine = MakeEngine(store->get(), true);
  auto plain = MakeEngine(nullptr, false);

  const std::vector<std::int32_t> shared = Prompt(1, 45);
  std::vector<Request> turns;
  for (int i = 0; i < 4; ++i) {
    Request r{"turn-" + std::to_string(i), shared, Greedy(6)};
    const std::vector<std::int32_t> tail = Prompt(10 + i, 3 + i);
    r.prompt.insert(r.prompt.end(), tail.begin(), tail.end());
    turns.push_back(std::move(r));
  }
  for (std::size_t i = 0; i < turns.size(); ++i) {
    SCOPED_TRACE(turns[i].id);
    if (i >= 2) {
      // Demotion runs: turns 2 and 3 read their prefix from disk, turn 1 read it from host.
      for (int k = 0; k < 5; ++k) {
        clock_.Advance(1000);
        ASSERT_TRUE((*store)->Step().ok());
      }
    }
    auto got = RunAll(*engine, {turns[i]});
    ASSERT_TRUE(got.ok()) << got.status();
    auto expected = RunAll(*plain, {turns[i]});
    ASSERT_TRUE(expected.ok()) << expected.status();
    EXPECT_EQ(got->at(turns[i].id).tokens, expected->at(turns[i].id).tokens);
    if (i > 0) {
      EXPECT_EQ(got->at(turns[i].id).cached_tokens, 44);
    }
    // Unrelated requests fill the 24-block pool so the next turn finds nothing on the device.
    for (int k = 0; k < 2; ++k) {
      Request filler{"fill-" + std::to_string(i) + "-" + std::to_string(k),
                     Prompt(100 + 2 * static_cast<int>(i) + k, 80), Greedy(4)};
      ASSERT_TRUE(RunAll(*engine, {filler}).ok());
    }
  }
  const KvTierStats& s = engine->kv_tier_stats();
  EXPECT_GT(s.host_hit_blocks, 0);
  EXPECT_GT(s.disk_hit_blocks, 0);
  EXPECT_EQ(s.fetch_shortfall_blocks, 0);
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, TieredRealModelTest, ::testing::ValuesIn(Checkpoints()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tandem::engine
