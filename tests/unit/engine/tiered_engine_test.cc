// The engine over the host/disk tiers: blocks the device pool evicts are copied down, a later
// request fetches its prefix back up, and nothing a tier does (full, slow, expired, corrupt)
// changes a single output token. The fake model checks every KV row it reads (token, position,
// layer, chained prefix hash), so a wrongly fetched or misplaced block fails the forward pass.

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine_test_util.h"
#include "fake_model.h"
#include "gtest/gtest.h"
#include "reference_decode.h"
#include "tandem/base/hash.h"
#include "tandem/engine/engine.h"
#include "tandem/kv/clock.h"
#include "tandem/kv/tiered_kv_store.h"

namespace tandem::engine {
namespace {

using testing::FakeModel;
using testing::Greedy;
using testing::ReferenceDecode;
using testing::Request;
using testing::RunAll;

constexpr std::int64_t kStartMs = 1'700'000'000'000;
constexpr int kBlockSize = 4;
// FakeModel: 2 layers x 4 floats per token.
constexpr std::size_t kBlockBytes = kBlockSize * 2 * FakeModel::kFloatsPerToken * sizeof(float);

std::vector<std::int32_t> Prompt(int seed, int len) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> tok(3, 63);
  std::vector<std::int32_t> p(len);
  for (auto& t : p) t = tok(rng);
  return p;
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "tandem_tiered_engine_XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class TieredEngineTest : public ::testing::Test {
 protected:
  kv::TieredKvStoreOptions StoreOptions(std::size_t host_blocks) {
    kv::TieredKvStoreOptions o;
    o.host_capacity_bytes = host_blocks * kBlockBytes;
    o.clock = &clock_;
    o.background_thread = false;  // the test steps maintenance with the fake clock
    return o;
  }
  std::unique_ptr<kv::TieredKvStore> OpenStore(const kv::TieredKvStoreOptions& o) {
    auto s = kv::TieredKvStore::Open(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::unique_ptr<Engine> MakeEngine(kv::TieredKvStore* store, int num_blocks = 12) {
    EngineConfig c;
    c.block_size = kBlockSize;
    c.num_blocks = num_blocks;
    c.max_batch_tokens = 256;
    c.lower_tiers = store;
    auto e = Engine::Create(&model_, backend_.get(), c);
    EXPECT_TRUE(e.ok()) << e.status();
    return std::move(*e);
  }
  std::vector<std::int32_t> Reference(const Request& r) {
    FakeModel fresh;
    auto out = ReferenceDecode(fresh, r.prompt, r.params, r.id);
    EXPECT_TRUE(out.ok()) << out.status();
    return *out;
  }
  // Runs one request alone and checks it against a decode without any caching.
  testing::Completion RunChecked(Engine& engine, const Request& r) {
    auto done = RunAll(engine, {r});
    EXPECT_TRUE(done.ok()) << done.status();
    if (!done.ok()) return {};
    EXPECT_EQ(done->at(r.id).tokens, Reference(r)) << r.id;
    return done->at(r.id);
  }
  // Requests over unrelated prompts that take the whole device pool, evicting what it cached.
  void Flush(Engine& engine, int seed) {
    for (int i = 0; i < 2; ++i) {
      RunChecked(engine, Request{"flush-" + std::to_string(seed + i), Prompt(seed + i, 36),
                                 Greedy(8)});
    }
  }

  // Host memory for 64 blocks that demotes all but the hottest few to disk.
  kv::TieredKvStoreOptions DiskOptions(const TempDir& dir) {
    kv::TieredKvStoreOptions o = StoreOptions(64);
    o.host_low_watermark = 0.1;
    o.disk_path = dir.path();
    o.disk_capacity_bytes = 1 << 20;
    return o;
  }
  // Computes `prompt`, evicts it from the device with unrelated requests, and lets demotion
  // move it to disk.
  void PushToDisk(Engine& engine, kv::TieredKvStore& store, const std::vector<std::int32_t>& prompt,
                  int seed) {
    RunChecked(engine, Request{"first", prompt, Greedy(4)});
    Flush(engine, seed);
    Flush(engine, seed + 100);
    for (int i = 0; i < 20; ++i) {
      clock_.Advance(1000);
      ASSERT_TRUE(store.Step().ok());
    }
    ASSERT_GT(store.Stats().disk.blocks, 0u);
    ASSERT_GT(store.Stats().host.demotions, 0u);
  }

  kv::FakeClock clock_{kStartMs};
  FakeModel model_;
  std::unique_ptr<kernels::Backend> backend_ = kernels::CreateCpuBackend({1});
};

TEST_F(TieredEngineTest, EvictedPrefixComesBackFromHostMemoryWithIdenticalOutputs) {
  auto store = OpenStore(StoreOptions(64));
  auto engine = MakeEngine(store.get());
  const std::vector<std::int32_t> shared = Prompt(1, 30);  // 7 full blocks before the last token
  Request first{"first", shared, Greedy(6)};
  EXPECT_EQ(RunChecked(*engine, first).cached_tokens, 0);
  Flush(*engine, 100);
  EXPECT_GT(engine->kv_tier_stats().spilled_blocks, 0);
  EXPECT_GT(store->Stats().host.blocks, 0u);

  Request again{"again", shared, Greedy(6)};
  again.prompt.insert(again.prompt.end(), {5, 6, 7});  // 33 tokens: 8 reusable blocks
  const testing::Completion c = RunChecked(*engine, again);
  // The 7 blocks of `shared` that were full (the 8th held generated tokens, not these).
  EXPECT_EQ(c.cached_tokens, 28);
  EXPECT_EQ(engine->kv_tier_stats().host_hit_blocks, 7);
  EXPECT_EQ(engine->kv_tier_stats().fetch_shortfall_blocks, 0);
}

TEST_F(TieredEngineTest, DiskBlocksAreFetchedWhileOtherRequestsKeepRunning) {
  TempDir dir;
  auto store = OpenStore(DiskOptions(dir));
  auto engine = MakeEngine(store.get(), 24);
  const std::vector<std::int32_t> shared = Prompt(2, 40);
  PushToDisk(*engine, *store, shared, 200);

  // The disk fetch runs on the store's threads; the other request is stepped meanwhile.
  Request hit{"hit", shared, Greedy(5)};
  hit.prompt.push_back(9);
  Request other{"other", Prompt(3, 9), Greedy(12)};
  auto done = RunAll(*engine, {hit, other});
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->at("hit").tokens, Reference(hit));
  EXPECT_EQ(done->at("other").tokens, Reference(other));
  EXPECT_EQ(done->at("hit").cached_tokens, 40);
  const KvTierStats& s = engine->kv_tier_stats();
  EXPECT_GT(s.disk_hit_blocks, 0);
  EXPECT_EQ(s.host_hit_blocks + s.disk_hit_blocks + s.device_hit_blocks, 10 + 0)
      << "hit's ten blocks, wherever they came from (other shares none)";
}

TEST_F(TieredEngineTest, DemotionsAreSpreadOverTimeByTheTokenBucket) {
  TempDir dir;
  kv::TieredKvStoreOptions o = StoreOptions(64);
  o.host_low_watermark = 0.1;
  o.disk_path = dir.path();
  o.disk_capacity_bytes = 1 << 20;
  o.demotion_rate_bytes_per_s = 2 * kBlockBytes;  // two blocks per second
  o.demotion_burst_bytes = 2 * kBlockBytes;
  auto store = OpenStore(o);
  auto engine = MakeEngine(store.get());
  const std::vector<std::int32_t> shared = Prompt(4, 40);
  RunChecked(*engine, Request{"first", shared, Greedy(4)});
  Flush(*engine, 400);
  const std::uint64_t host_blocks = store->Stats().host.blocks;
  ASSERT_GT(host_blocks, 10u);
  std::vector<std::uint64_t> per_second;
  std::uint64_t before = 0;
  for (int i = 0; i < 12; ++i) {
    clock_.Advance(1000);
    ASSERT_TRUE(store->Step().ok());
    const std::uint64_t now = store->Stats().host.demotions;
    per_second.push_back(now - before);
    before = now;
  }
  for (std::uint64_t n : per_second) EXPECT_LE(n, 2u);  // never a burst
  EXPECT_GE(before, 12u);  // but steady: the bucket's full rate was used
  Request hit{"hit", shared, Greedy(5)};
  hit.prompt.push_back(9);
  EXPECT_EQ(RunChecked(*engine, hit).cached_tokens, 40);
}

TEST_F(TieredEngineTest, ExpiredBlocksAreNeverServedAndEachClassHasItsOwnTtl) {
  kv::TieredKvStoreOptions o = StoreOptions(64);
  o.ttl.ttl_ms = {10'000, 3'000};  // chat, agent
  auto store = OpenStore(o);
  auto engine = MakeEngine(store.get());
  const std::vector<std::int32_t> chat_prompt = Prompt(5, 21);
  const std::vector<std::int32_t> agent_prompt = Prompt(6, 21);
  auto add = [&](const std::string& id, const std::vector<std::int32_t>& p, kv::TrafficClass c) {
    Engine::RequestOptions opts;
    opts.traffic_class = c;
    ASSERT_TRUE(engine->AddRequest(id, p, Greedy(3), opts).ok());
    ASSERT_TRUE(RunAll(*engine, {}).ok());
  };
  add("chat", chat_prompt, kv::TrafficClass::kChat);
  add("agent", agent_prompt, kv::TrafficClass::kAgent);
  Flush(*engine, 500);
  clock_.Advance(5'000);  // past agent's TTL, within chat's
  auto hits = [&](const std::string& id, const std::vector<std::int32_t>& p, kv::TrafficClass c) {
    Engine::RequestOptions opts;
    opts.traffic_class = c;
    EXPECT_TRUE(engine->AddRequest(id, p, Greedy(3), opts).ok());
    auto done = RunAll(*engine, {});
    EXPECT_TRUE(done.ok());
    EXPECT_EQ(done->at(id).tokens, Reference(Request{id, p, Greedy(3)}));
    return done->at(id).cached_tokens;
  };
  EXPECT_EQ(hits("agent-again", agent_prompt, kv::TrafficClass::kAgent), 0);
  EXPECT_EQ(hits("chat-again", chat_prompt, kv::TrafficClass::kChat), 20);
  // A class is a namespace too: agent traffic does not read chat's blocks.
  Flush(*engine, 600);
  EXPECT_EQ(hits("chat-as-agent", chat_prompt, kv::TrafficClass::kAgent), 0);
  clock_.Advance(60'000);
  ASSERT_TRUE(store->Step().ok());
  EXPECT_EQ(store->Stats().host.blocks, 0u) << "every entry is past its TTL and removed";
}

TEST_F(TieredEngineTest, FullOrBrokenTiersDegradeToRecompute) {
  // Host memory for one block: nearly every spill is dropped, and the request is recomputed.
  auto tiny = OpenStore(StoreOptions(1));
  auto engine = MakeEngine(tiny.get());
  const std::vector<std::int32_t> shared = Prompt(7, 30);
  RunChecked(*engine, Request{"first", shared, Greedy(4)});
  Flush(*engine, 700);
  EXPECT_GT(engine->kv_tier_stats().spill_dropped_blocks, 0);
  RunChecked(*engine, Request{"again", shared, Greedy(4)});

  // Blocks of the wrong size under the right hashes (another model's KV, say): the fetch stops
  // there and the prefix is recomputed.
  auto store = OpenStore(StoreOptions(64));
  auto engine2 = MakeEngine(store.get());
  const std::vector<std::int32_t> p = Prompt(8, 22);
  std::uint64_t parent = 0;
  for (int i = 0; i < 5; ++i) {
    const std::uint64_t h = ChainedBlockHash(
        parent, std::span<const std::int32_t>(p).subspan(i * kBlockSize, kBlockSize));
    const std::vector<std::uint8_t> wrong(kBlockBytes / 2, 0xAB);
    ASSERT_TRUE(store->Put(kv::TrafficClass::kChat, h, parent, wrong).ok());
    parent = h;
  }
  const testing::Completion c = RunChecked(*engine2, Request{"wrong-size", p, Greedy(4)});
  EXPECT_EQ(c.cached_tokens, 0);
  EXPECT_EQ(engine2->kv_tier_stats().fetch_shortfall_blocks, 5);
}

TEST_F(TieredEngineTest, CancellingARequestWhileItsBlocksAreFetchedFreesThem) {
  TempDir dir;
  auto store = OpenStore(DiskOptions(dir));
  auto engine = MakeEngine(store.get(), 24);
  const std::vector<std::int32_t> shared = Prompt(9, 40);
  PushToDisk(*engine, *store, shared, 800);
  ASSERT_TRUE(engine->AddRequest("x", shared, Greedy(4)).ok());
  ASSERT_TRUE(engine->Step().ok());  // admission starts the disk fetch
  ASSERT_TRUE(engine->Cancel("x").ok());
  auto done = RunAll(*engine, {});
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->at("x").reason, FinishReason::kCancelled);
  EXPECT_EQ(engine->stats().num_free_blocks, engine->stats().num_blocks);
  RunChecked(*engine, Request{"after", shared, Greedy(4)});
}

}  // namespace
}  // namespace tandem::engine
